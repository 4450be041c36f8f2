"""What the docs tests share: the repository, markdown code blocks, and a ``troth serve``
subprocess on a free port."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

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


def clean_env(**extra: str) -> dict[str, str]:
    """The environment of a new user's shell: no TROTH_* setting left over from the tests."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TROTH_")}
    return {**env, "PYTHONUNBUFFERED": "1", **extra}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url: str, process: subprocess.Popen[bytes], log: Path, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert process.poll() is None, f"the server exited:\n{log.read_text()}"
        try:
            if httpx.get(f"{url}/ready", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"the server did not become ready:\n{log.read_text()}")


class Server:
    """``troth serve`` on a free port with a database in ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = directory / f"server-{self.port}.log"
        command = [sys.executable, "-m", "troth", "serve", "--port", str(self.port),
                   "--db", str(directory / f"server-{self.port}.db")]  # fmt: skip
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=log, env=clean_env())
        try:
            wait_ready(self.url, self.process, self.log)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
