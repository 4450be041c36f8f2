"""A real ``troth serve`` on either backend, for tests that must hold on both, and the
server process's resident memory.

``BACKENDS`` parametrizes a test over SQLite and (marked ``pg``, skipped without
``TROTH_TEST_PG_URL``) PostgreSQL; ``serve(backend, folder, *flags)`` starts a server on a
fresh database of that backend and stops it (and drops the database) afterwards.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.postgres import cluster_url, fresh_database

from ._harness import TrothServer

BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.pg)]


@contextlib.contextmanager
def serve(backend: str, folder: Path, *flags: str) -> Iterator[TrothServer]:
    with contextlib.ExitStack() as stack:
        db: Any = folder / "t.db"
        if backend == "postgres":
            db = stack.enter_context(fresh_database(cluster_url(), "troth_limits"))
        server = TrothServer(db, folder / "server.log", ("--debug", *flags), {})
        stack.callback(server.close)
        yield server.start()


def rss_mb(server: TrothServer) -> float:
    """The server process's resident set (``VmRSS``), in MB."""
    assert server.process is not None
    status = Path(f"/proc/{server.process.pid}/status").read_text()
    line = next(line for line in status.splitlines() if line.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024
