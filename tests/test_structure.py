"""The shape of the code, checked: every kind has its handlers, and the packages import only
downwards.

The engine and the oracle are two implementations of one machine, and the protocol says
which kinds that machine answers; a kind added to one of the three and forgotten in another
would surface only as a confusing 500 or a differential test that never runs it. The
layering is the table of docs/architecture.md, so that the pure packages stay pure (the
protocol does no I/O, the oracle never borrows the engine's code, the SDK installs without
the server's dependencies).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import troth
from troth.engine import HANDLERS as ENGINE_HANDLERS
from troth.engine import READ_ONLY
from troth.engine import timeouts as engine_timeouts
from troth.engine.store import TimeoutKind
from troth.oracle import Oracle
from troth.oracle import timeouts as oracle_timeouts
from troth.oracle.machine import HANDLERS as ORACLE_HANDLERS
from troth.protocol.kinds import Kind

SOURCE = Path(troth.__file__).parent


def names(kinds: Any) -> set[str]:
    """Kind names as plain strings, whether the kinds are strings or an enum of them."""
    return {getattr(kind, "value", kind) for kind in kinds}


DEBUG = {kind for kind in names(Kind) if kind.startswith("debug.")}
MACHINE = names(Kind) - DEBUG  # what the Lean machine and its extensions answer


# -- kinds ----------------------------------------------------------------------------------


def test_the_engine_handles_exactly_the_protocols_non_debug_kinds() -> None:
    assert names(ENGINE_HANDLERS) == MACHINE


# Queues are state of troth's own outside the Lean machine (docs/queues.md); the oracle
# judges the machine, and the differential never puts a promise in a queue.
QUEUES = {kind for kind in MACHINE if kind.startswith("queue.")}


def test_the_oracle_handles_exactly_the_protocols_non_debug_kinds() -> None:
    assert {"queue.set", "queue.get", "queue.search"} == QUEUES
    assert names(ORACLE_HANDLERS) == MACHINE - QUEUES


@pytest.mark.parametrize("kind", sorted(DEBUG))
def test_the_oracle_answers_every_debug_kind_itself(kind: str) -> None:
    data = {"time": 0} if kind == "debug.tick" else {}
    envelope = {"kind": kind, "head": {"corrId": "1", "version": "2026-04-01"}, "data": data}
    assert Oracle().apply(envelope)["head"]["status"] == 200


def test_read_only_kinds_are_handled_kinds() -> None:
    assert names(READ_ONLY) <= names(ENGINE_HANDLERS)


def transitions(module: Any) -> set[str]:
    return {name for name in vars(module) if name.startswith("on_") and name.endswith("_timeout")}


def test_the_engine_and_the_oracle_have_the_same_internal_transitions() -> None:
    # Lean's four: a promise's deadline, a task's retry, a task's lease, a schedule's tick.
    assert transitions(engine_timeouts) == transitions(oracle_timeouts)
    assert len(transitions(engine_timeouts)) == len(TimeoutKind) == 4


# -- layering -------------------------------------------------------------------------------

PACKAGES = [
    "troth.protocol", "troth.engine", "troth.views", "troth.storage", "troth.server",
    "troth.sdk", "troth.oracle", "troth.cli", "troth.testing",
]  # fmt: skip
# What each package may import of troth; the same table is in docs/architecture.md. A module
# is ruled by the longest name here that it falls under.
MAY_IMPORT: dict[str, set[str]] = {
    "troth.protocol": set(),
    "troth.engine": {"troth.protocol"},
    "troth.views": {"troth.protocol"},
    "troth.storage": {"troth.protocol", "troth.engine", "troth.views"},
    "troth.server": {"troth.protocol", "troth.engine", "troth.views", "troth.storage"},
    "troth.sdk": {"troth.protocol", "troth.views"},
    # Embedded mode: the engine in-process on a SQLite file.
    "troth.sdk.app": {"troth.protocol", "troth.views", "troth.engine", "troth.storage"},
    "troth.sdk.local": {"troth.protocol", "troth.views", "troth.engine", "troth.storage"},
    "troth.oracle": {"troth.protocol"},
    "troth.cli": set(PACKAGES),
    "troth.__main__": {"troth.cli"},
    "troth": {"troth.sdk"},  # troth/__init__.py: the public surface, re-exported
    "troth.testing": {"troth.sdk"},
}


def modules(source: Path) -> Iterator[tuple[str, Path]]:
    for path in sorted(source.rglob("*.py")):
        parts = path.relative_to(source.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield ".".join(parts), path


def imports(module: str, path: Path) -> set[str]:
    """Every troth module ``module`` imports, wherever the import statement stands."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
    return {name for name in found if name == "troth" or name.startswith("troth.")}


def under(module: str, prefixes: Any) -> str | None:
    """The longest of ``prefixes`` that ``module`` is or lies inside."""
    inside = [p for p in prefixes if module == p or module.startswith(p + ".")]
    return max(inside, key=len, default=None)


def layering_violations(source: Path) -> list[str]:
    found = []
    for module, path in modules(source):
        rule = under(module, MAY_IMPORT)
        if rule is None:
            found.append(f"{module}: not in the layering table")
            continue
        own = under(module, PACKAGES) or module
        for imported in sorted(imports(module, path)):
            target = under(imported, PACKAGES) or imported
            if target != own and target not in MAY_IMPORT[rule]:
                found.append(f"{module} imports {imported} ({rule} may import only "
                             f"{sorted(MAY_IMPORT[rule]) or 'nothing of troth'})")  # fmt: skip
    return found


def test_every_package_imports_only_what_the_layering_allows() -> None:
    assert layering_violations(SOURCE) == []


def test_the_sdk_never_imports_the_server() -> None:
    # `pip install troth` has no uvicorn: the SDK, embedded mode included, must not need it.
    sdk = [
        (module, imported)
        for module, path in modules(SOURCE)
        if under(module, ["troth.sdk", "troth.testing"]) or module == "troth"
        for imported in imports(module, path)
        if under(imported, ["troth.server", "troth.cli"])
    ]
    assert sdk == []
    code = (
        "import sys, troth, troth.sdk, troth.testing; "
        "print(sorted(m for m in sys.modules if m.startswith(('troth.server', 'uvicorn'))))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True)
    assert loaded.stdout.decode().strip() == "[]"


# -- cycles and size ------------------------------------------------------------------------

# Type-only edges that are not cycles in anything but name: a leaf module that only annotates
# with a class of a module importing it (docs/architecture.md, "Cycles").
TYPE_ONLY_BACK_EDGES = {("troth.sdk.signatures", "troth.sdk.context")}
MAX_LINES = 700


def edges(source: Path) -> dict[str, set[str]]:
    """Each troth module and the troth modules it imports, wherever the import stands (in a
    function, under ``TYPE_CHECKING``): ``from troth.sdk import attempts`` is an edge to
    ``troth.sdk.attempts``, a name that is not a module an edge to the package."""
    known = {module for module, _ in modules(source)}
    graph: dict[str, set[str]] = {}
    for module, path in modules(source):
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    anchor = parts[: len(parts) - (node.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                for alias in node.names:
                    child = f"{base}.{alias.name}"
                    found.add(child if child in known else base)
        graph[module] = {
            m for m in found if m in known and m != module
            and (module, m) not in TYPE_ONLY_BACK_EDGES
        }  # fmt: skip
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_no_modules_import_each_other_even_inside_functions() -> None:
    """A cycle, however deferred, means two modules that cannot be understood apart: put
    what both need below both (docs/architecture.md)."""
    assert cycles(edges(SOURCE)) == []


def test_the_cycle_finder_finds_a_deferred_cycle(tmp_path: Path) -> None:
    package = tmp_path / "troth"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from troth import b\n")
    (package / "b.py").write_text("def f():\n    from troth.a import x\n")
    (package / "c.py").write_text("import troth.a\n")
    assert cycles(edges(package)) == [["troth.a", "troth.b"]]


def test_no_module_is_over_700_lines() -> None:
    long = {
        module: n
        for module, path in modules(SOURCE)
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}
