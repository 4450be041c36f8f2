"""Fixtures: servers started per test (and killed after it), SSE clients, a push target."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ._harness import PushTarget, SseClient, TrothServer


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[Callable[..., TrothServer]]:
    servers: list[TrothServer] = []

    def start(*flags: str, debug: bool = True, env: dict[str, str] | None = None) -> TrothServer:
        n = len(servers)
        server = TrothServer(
            tmp_path / f"t{n}.db",
            tmp_path / f"server{n}.log",
            (*flags, "--debug") if debug else flags,
            env or {},
        )
        servers.append(server)
        return server.start()

    yield start
    for server in servers:
        server.close()


@pytest.fixture
def server(start_server: Callable[..., TrothServer]) -> TrothServer:
    return start_server()


@pytest.fixture
def sse(server: TrothServer) -> Iterator[Callable[..., SseClient]]:
    clients: list[SseClient] = []

    def connect(group: str, id: str, on: TrothServer | None = None) -> SseClient:
        client = SseClient((on or server).port, group, id)
        clients.append(client)
        return client

    yield connect
    for client in clients:
        client.close()


@pytest.fixture
def push_target() -> Iterator[PushTarget]:
    target = PushTarget()
    yield target
    target.close()
