"""Fixtures more than one test package uses; ``tests/conftest.py`` makes them available to
every test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.push import PushTarget
from tests.support.servers import TrothServer


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[Callable[..., TrothServer]]:
    """``start_server(*flags, debug=True, env=None)``: a started ``troth serve`` on a
    database file of its own in ``tmp_path``; every one is killed after the test."""
    servers: list[TrothServer] = []

    def start(*flags: str, debug: bool = True, env: dict[str, str] | None = None) -> TrothServer:
        n = len(servers)
        server = TrothServer(
            tmp_path / f"t{n}.db",
            tmp_path / f"server{n}.log",
            (*flags, "--debug") if debug else flags,
            env,
        )
        servers.append(server)
        return server.start()

    yield start
    for server in servers:
        server.close()


@pytest.fixture
def push_target() -> Iterator[PushTarget]:
    target = PushTarget()
    yield target
    target.close()
