"""Every code block of the README, docs/*.md and examples/README.md that a user would run
runs as shown, so the docs cannot rot.

- A Python block runs as a script of its own in an empty directory, in embedded mode (no
  TROTH_* setting), or against a fresh ``troth serve`` when its first line says
  ``# needs troth serve``; it must exit 0.
- A block that is deliberately not runnable starts with ``# fragment: <why>`` (see
  ``_support.FRAGMENT``): it must still parse (top-level ``await`` allowed), and say why.
- In shell blocks, every ``troth ...`` command must parse with the real command line (no
  flag that does not exist), and every ``python examples/<x>.py`` and
  ``troth worker examples.<x>:app`` must name an example that exists. The README's shell
  blocks are also run, in order, by ``test_first_hour.py``.
"""

from __future__ import annotations

import ast
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.processes import clean_env
from troth import cli

from ._support import FRAGMENT, REPO, Block, blocks, doc_files, user_server

PYTHON = [b for path in doc_files() for b in blocks(path, "python")]
SHELL = [b for path in doc_files() for b in blocks(path, "sh", "bash", "console")]
NEEDS_SERVER = "# needs troth serve"


def names(found: list[Block]) -> list[str]:
    return [b.name for b in found]


def test_the_docs_have_code_blocks_to_check():
    """The extractor finds the README's workflow and the SDK guide's examples (a broken
    extractor would make every other test here pass vacuously)."""
    assert "README.md:" in " ".join(names(PYTHON))
    assert sum(not b.fragment for b in PYTHON) >= 4
    assert len(SHELL) >= 10


@pytest.mark.slow  # each block runs in a Python process of its own, some against a troth serve
@pytest.mark.parametrize("block", [b for b in PYTHON if not b.fragment], ids=lambda b: b.name)
def test_a_python_block_runs_as_shown(block: Block, tmp_path: Path):
    script = tmp_path / "block.py"
    script.write_text(block.code)
    env = clean_env()
    server = user_server(tmp_path) if block.code.startswith(NEEDS_SERVER) else None
    if server is not None:
        env["TROTH_URL"] = server.url
    try:
        done = subprocess.run(
            [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, timeout=120
        )
    finally:
        if server is not None:
            server.close()
    output = (done.stdout + done.stderr).decode()
    assert done.returncode == 0, f"{block.name} failed:\n{output}"
    assert "Traceback" not in output, f"{block.name} logged an error:\n{output}"


@pytest.mark.parametrize("block", [b for b in PYTHON if b.fragment], ids=lambda b: b.name)
def test_a_fragment_says_why_and_parses(block: Block):
    first = block.code.lstrip().splitlines()[0]
    assert re.fullmatch(rf"{FRAGMENT}: \S.*", first), f"{block.name}: say why: {first!r}"
    compile(block.code, block.name, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


def test_fragments_are_few():
    assert sum(b.fragment for b in PYTHON) <= sum(not b.fragment for b in PYTHON)


def commands(block: Block) -> list[list[str]]:
    """Each ``troth`` command line of a shell block as words, without the prompt, the
    environment assignments before it, what follows ``&``/``|``/``;``, and comments."""
    found = []
    for line in block.code.replace("\\\n", " ").splitlines():
        line = line.removeprefix("$ ").strip()
        if not re.match(r"([A-Z_]+=\S* +)*troth( |$)", line):
            continue
        words = shlex.split(line, comments=True)
        while "=" in words[0]:
            words.pop(0)
        for i, word in enumerate(words):
            if word in ("&", "|", ";", "&&", "||"):
                words = words[:i]
                break
        found.append(words)
    return found


@pytest.mark.parametrize("block", [b for b in SHELL if commands(b)], ids=lambda b: b.name)
def test_every_troth_command_in_the_docs_parses(block: Block, capsys):
    for words in commands(block):
        try:
            args = cli._parser().parse_args(words[1:])
        except SystemExit:
            pytest.fail(f"{block.name}: {shlex.join(words)!r}: {capsys.readouterr().err}")
        if args.command == "worker" and args.app.startswith("examples."):
            module = args.app.partition(":")[0].replace(".", "/")
            assert (REPO / f"{module}.py").exists(), f"{block.name}: no {module}.py"


@pytest.mark.parametrize("block", SHELL, ids=lambda b: b.name)
def test_every_example_the_docs_run_exists(block: Block):
    for example in re.findall(r"python (examples/\S+\.py)", block.code):
        assert (REPO / example).exists(), f"{block.name}: {example} does not exist"
