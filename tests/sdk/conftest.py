"""Fixtures for the SDK tests: an app in embedded mode (virtual time) or against a real
``troth serve`` subprocess, so that every scenario can run in both modes.

``start_server`` (a server per test) comes from ``tests.support.fixtures``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.sdk.modes import MODES
from tests.support.servers import TrothServer
from troth.sdk import Troth
from troth.testing import VirtualTroth


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TrothServer]:
    """One server for the module's remote-mode tests; they keep apart by groups and ids."""
    folder = tmp_path_factory.mktemp("server")
    s = TrothServer(folder / "t.db", folder / "server.log", ("--tasks-retry-timeout", "1000"))
    yield s.start()
    s.close()


@pytest.fixture(params=MODES)
def make_app(request: pytest.FixtureRequest) -> Callable[..., Troth]:
    """A factory of apps in the parametrized mode; remote apps get a group of their own."""
    if request.param == "embedded":
        return lambda **kwargs: VirtualTroth(**kwargs)
    server: TrothServer = request.getfixturevalue("server")
    group = f"g{uuid.uuid4().hex[:8]}"

    def remote(**kwargs: Any) -> Troth:
        kwargs.setdefault("group", group)
        return Troth(url=server.url, **kwargs)

    return remote


@pytest.fixture
def uid() -> str:
    """A fresh id prefix, so tests that share a server never share executions."""
    return f"t{uuid.uuid4().hex[:10]}"


@pytest.fixture(params=MODES)
def mode_env(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """The environment that puts a worker process (``support.processes``) in the
    parametrized mode: a database file of its own, or the shared server and a fresh group."""
    if request.param == "embedded":
        return {"TROTH_DB": str(tmp_path / "troth.db")}
    server: TrothServer = request.getfixturevalue("server")
    return {"TROTH_URL": server.url, "TROTH_GROUP": f"g{uuid.uuid4().hex[:8]}"}
