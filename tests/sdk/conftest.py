"""Fixtures for the SDK tests: an app in embedded mode (virtual time) or against a real
``troth serve`` subprocess, so that every scenario can run in both modes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from troth.sdk import Troth
from troth.testing import VirtualTroth


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``python -m troth serve`` on a free port and its own database file."""

    def __init__(self, directory: Path, *flags: str, port: int | None = None) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = directory / f"server-{self.port}.log"
        command = [
            sys.executable, "-m", "troth", "serve", "--host", "127.0.0.1",
            "--port", str(self.port), "--db", str(directory / f"server-{self.port}.db"), *flags,
        ]  # fmt: skip
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=log, env=os.environ)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited:\n{self.log.read_text()}")
            try:
                if httpx.get(f"{self.url}/ready", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        self.close()
        raise RuntimeError(f"server did not become ready:\n{self.log.read_text()}")

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[Callable[..., Server]]:
    """Start servers on demand (``port=`` reuses one, as a restart would); all are stopped."""
    started: list[Server] = []

    def start(port: int | None = None) -> Server:
        started.append(Server(tmp_path, port=port))
        return started[-1]

    yield start
    for s in started:
        s.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    s = Server(tmp_path_factory.mktemp("server"), "--tasks-retry-timeout", "1000")
    yield s
    s.close()


@pytest.fixture(params=["embedded", "remote"])
def make_app(request: pytest.FixtureRequest) -> Callable[..., Troth]:
    """A factory of apps in the parametrized mode; remote apps get a group of their own."""
    if request.param == "embedded":
        return lambda **kwargs: VirtualTroth(**kwargs)
    server: Server = request.getfixturevalue("server")
    group = f"g{uuid.uuid4().hex[:8]}"

    def remote(**kwargs: Any) -> Troth:
        kwargs.setdefault("group", group)
        return Troth(url=server.url, **kwargs)

    return remote


@pytest.fixture
def uid() -> str:
    """A fresh id prefix, so tests that share a server never share executions."""
    return f"t{uuid.uuid4().hex[:10]}"


@pytest.fixture(params=["embedded", "remote"])
def mode_env(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """The environment that puts a worker process (``support.processes``) in the
    parametrized mode: a database file of its own, or the shared server and a fresh group."""
    if request.param == "embedded":
        return {"TROTH_DB": str(tmp_path / "troth.db")}
    server: Server = request.getfixturevalue("server")
    return {"TROTH_URL": server.url, "TROTH_GROUP": f"g{uuid.uuid4().hex[:8]}"}
