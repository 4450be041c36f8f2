"""Fixtures: a server started per test (and killed after it), SSE clients to it.

``start_server`` and ``push_target`` come from ``tests.support.fixtures``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.support.servers import TrothServer
from tests.support.sse import SseClient


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
