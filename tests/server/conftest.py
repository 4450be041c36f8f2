"""Fixtures: a server started per test (and killed after it), SSE clients to it, key pairs.

``start_server`` and ``push_target`` come from ``tests.support.fixtures``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.support.servers import TrothServer
from tests.support.sse import SseClient
from tests.support.tokens import Keys


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


@pytest.fixture(scope="session")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Keys:
    """Key pairs for a server with auth on, made once for the session."""
    return Keys(tmp_path_factory.mktemp("keys"))
