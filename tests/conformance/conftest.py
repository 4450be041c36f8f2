"""One live ``troth serve --debug`` per test module, and an HTTP machine talking to it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from tests.server._harness import TrothServer
from tests.support.postgres import cluster_url, fresh_database

from ._client import MAX_BODY_BYTES, RETRY_TIMEOUT, HttpMachine


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def live(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TrothServer]:
    """The server under test, on each backend: the same suite judges both."""
    folder = tmp_path_factory.mktemp("conformance")
    flags = (
        "--debug",
        *("--tasks-retry-timeout", str(RETRY_TIMEOUT)),
        *("--max-body-bytes", str(MAX_BODY_BYTES)),
    )
    with contextlib.ExitStack() as stack:
        if request.param == "postgres":
            db: Any = stack.enter_context(fresh_database(cluster_url(), "troth_conformance"))
        else:
            db = folder / "t.db"
        server = TrothServer(db, folder / "server.log", flags, {})
        server.start()
        stack.callback(server.close)
        yield server


@pytest.fixture(scope="module")
def machine(live: TrothServer) -> Iterator[HttpMachine]:
    m = HttpMachine(live.url)
    yield m
    m.close()
