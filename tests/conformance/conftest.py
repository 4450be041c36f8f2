"""One live ``troth serve --debug`` per test module, and an HTTP machine talking to it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.servers import BACKENDS, TrothServer, serve

from ._client import MAX_BODY_BYTES, RETRY_TIMEOUT, HttpMachine


@pytest.fixture(scope="module", params=BACKENDS)
def live(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TrothServer]:
    """The server under test, on each backend: the same suite judges both."""
    flags = (
        *("--tasks-retry-timeout", str(RETRY_TIMEOUT)),
        *("--max-body-bytes", str(MAX_BODY_BYTES)),
    )
    with serve(request.param, tmp_path_factory.mktemp("conformance"), *flags) as server:
        yield server


@pytest.fixture(scope="module")
def machine(live: TrothServer) -> Iterator[HttpMachine]:
    m = HttpMachine(live.url)
    yield m
    m.close()
