"""One live ``troth serve --debug`` per test module, and an HTTP machine talking to it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from server._harness import TrothServer

from ._client import MAX_BODY_BYTES, RETRY_TIMEOUT, HttpMachine


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TrothServer]:
    folder = tmp_path_factory.mktemp("conformance")
    flags = (
        "--debug",
        *("--tasks-retry-timeout", str(RETRY_TIMEOUT)),
        *("--max-body-bytes", str(MAX_BODY_BYTES)),
    )
    server = TrothServer(folder / "t.db", folder / "server.log", flags, {})
    server.start()
    yield server
    server.close()


@pytest.fixture(scope="module")
def machine(live: TrothServer) -> Iterator[HttpMachine]:
    m = HttpMachine(live.url)
    yield m
    m.close()
