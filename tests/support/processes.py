"""Worker processes for the tests: a module written into a temporary folder, run as
``troth worker`` (or as a script), against a server URL or an embedded database file; the
environment a child process starts in; what a process costs."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

# The prelude of every app module: TROTH_URL (remote) or TROTH_DB (embedded) picks the mode.
PRELUDE = """
import asyncio, os, sys, time
from datetime import timedelta
from pathlib import Path
from troth import Context, Troth
from troth import Constant

LEDGER = Path(os.environ["LEDGER"])

def record(line: str) -> None:
    with LEDGER.open("a") as f:
        f.write(line + "\\n")
        f.flush()
        os.fsync(f.fileno())

app = Troth(
    url=os.environ.get("TROTH_URL"),
    group=os.environ.get("TROTH_GROUP", "default"),
    db=os.environ.get("TROTH_DB"),
    ttl=timedelta(seconds=float(os.environ.get("TTL", "30"))),
)
"""


def write_module(directory: Path, name: str, body: str) -> Path:
    path = directory / f"{name}.py"
    path.write_text(PRELUDE + textwrap.dedent(body))
    return path


def ledger(path: Path) -> Counter[str]:
    return Counter(path.read_text().splitlines()) if path.exists() else Counter()


def wait_for(path: Path, line: str, count: int = 1, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while ledger(path)[line] < count:
        assert time.monotonic() < deadline, f"{line!r} x{count} never appeared: {ledger(path)}"
        time.sleep(0.02)


def clean_env(**extra: str) -> dict[str, str]:
    """The environment of a new user's shell: no TROTH_* setting left over from the tests."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TROTH_")}
    return {**env, "PYTHONUNBUFFERED": "1", **extra}


def rss_mb(pid: int) -> float:
    """Process ``pid``'s resident set (``VmRSS``), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for process {pid}")


def start(
    directory: Path, env: dict[str, str], *args: str, log: Path | None = None
) -> subprocess.Popen[bytes]:
    """``python *args`` in ``directory`` with ``env`` added; its output is piped, or
    appended to ``log`` (for a long-running process nobody reads while it runs)."""
    with contextlib.ExitStack() as stack:
        output = stack.enter_context(open(log, "ab")) if log else subprocess.PIPE
        return subprocess.Popen(
            [sys.executable, *args],
            cwd=directory,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **env},
            stdout=output,
            stderr=subprocess.STDOUT,
        )


def worker(
    directory: Path, env: dict[str, str], module: str, log: Path | None = None
) -> subprocess.Popen[bytes]:
    """``troth worker module`` for the app ``module`` (``name`` or ``name:attribute``) in
    ``directory``."""
    return start(directory, env, "-m", "troth", "worker", module, log=log)
