"""What the docs tests share: the repository, markdown code blocks, and a ``troth serve``
started as a new user would start it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from tests.support.servers import TrothServer

REPO = Path(__file__).resolve().parents[2]
# Blocks a user is not meant to run on their own start with this comment, which says why
# (a fragment of a larger example, a sketch with placeholder hosts); the tests only check
# that they parse.
FRAGMENT = "# fragment"
_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.DOTALL | re.MULTILINE)


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    language: str
    code: str

    @property
    def fragment(self) -> bool:
        return self.code.lstrip().startswith(FRAGMENT)

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"


def blocks(path: Path, *languages: str) -> list[Block]:
    text = path.read_text()
    found = []
    for match in _FENCE.finditer(text):
        if match.group(1) in languages:
            line = text.count("\n", 0, match.start()) + 1
            found.append(Block(path, line, match.group(1), match.group(2)))
    return found


def doc_files() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "examples/README.md"]


def user_server(directory: Path) -> TrothServer:
    """``troth serve`` as a new user starts it (no ``TROTH_*`` setting, no flag but its port
    and database), on a database in ``directory``."""
    server = TrothServer(directory / "server.db", directory / "server.log", as_new_user=True)
    return server.start()
