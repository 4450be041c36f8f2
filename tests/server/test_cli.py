"""``troth serve`` / ``troth dev``: configuration from flags and environment, clean shutdown."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.support.ports import free_port
from tests.support.servers import TrothServer
from tests.support.sse import SseClient
from troth.cli import _parser
from troth.cli.server import config_from
from troth.server.config import ServerConfig

# Slow: a troth serve process per test (tests/conformance covers the server in the fast suite).
pytestmark = pytest.mark.slow


def config(argv: list[str], env: dict[str, str] | None = None) -> ServerConfig:
    return config_from(_parser().parse_args(argv), env or {})


def test_serve_defaults() -> None:
    c = config(["serve"])
    assert (c.bind, c.port, c.db, c.debug) == ("127.0.0.1", 8001, "troth-server.db", False)
    assert (c.tasks_retry_timeout, c.max_body_bytes) == (5000, 2 * 1024 * 1024)
    assert c.url == "http://127.0.0.1:8001"


def test_environment_configures_and_flags_win() -> None:
    env = {
        "TROTH_PORT": "9000",
        "TROTH_DB": "/data/x.db",
        "TROTH_DEBUG": "true",
        "TROTH_TASKS_RETRY_TIMEOUT": "750",
        "TROTH_HOST": "127.0.0.1",
    }
    c = config(["serve"], env)
    assert (c.port, c.db, c.debug, c.tasks_retry_timeout) == (9000, "/data/x.db", True, 750)
    assert c.url == "http://127.0.0.1:9000"
    c = config(["serve", "--port", "9001", "--no-debug"], env)
    assert (c.port, c.debug) == (9001, False)


def test_dev_turns_debug_on_and_ignores_troth_db() -> None:
    c = config(["dev"], {"TROTH_DB": "/data/real.db", "TROTH_DEBUG": "false"})
    assert c.debug is True
    assert c.db == "troth-server.db"  # replaced by a throwaway file when run


def test_a_bad_environment_value_is_a_usage_error() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "troth", "serve"],
        env={**os.environ, "TROTH_PORT": "eighty"},
        capture_output=True,
    )
    assert run.returncode == 2
    assert b"TROTH_PORT='eighty' is not an integer" in run.stderr


def test_sigterm_ends_open_streams_and_exits_0(server: TrothServer) -> None:
    worker = SseClient(server.port, "g", "w1")
    try:
        start = time.monotonic()
        assert server.terminate(timeout=10) == 0
        assert time.monotonic() - start < 5
        # The stream was ended properly: the terminating chunk, then the socket closes.
        chunk = worker.chunk()
        while chunk.startswith(b":"):
            chunk = worker.chunk()
        assert chunk == b""
    finally:
        worker.close()
    assert "troth serving at" in server.output()


@pytest.mark.parametrize("command", [["troth"], [sys.executable, "-m", "troth"]])
def test_dev_serves_in_debug_mode_on_a_throwaway_database(
    tmp_path: Path, command: list[str]
) -> None:
    if command == ["troth"]:
        command = [str(Path(sys.executable).parent / "troth")]
    port = free_port()
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    process = subprocess.Popen(
        [*command, "dev", "--port", str(port), "--host", "127.0.0.1"],
        env=env,
        stderr=subprocess.PIPE,
    )
    try:
        url = f"http://127.0.0.1:{port}"

        def ready() -> bool:
            try:
                return httpx.get(f"{url}/ready").status_code == 200
            except httpx.HTTPError:
                return False

        deadline = time.monotonic() + 20
        while not ready():
            assert time.monotonic() < deadline and process.poll() is None
            time.sleep(0.05)
        snap = {"kind": "debug.snap", "head": {"corrId": "c", "version": "2026-04-01"}, "data": {}}
        assert httpx.post(url, json=snap).status_code == 200
        assert list(tmp_path.glob("troth-dev-*/troth-dev.db"))
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(10) == 0
    log = process.stderr.read().decode() if process.stderr else ""
    assert re.search(r"troth serving at http://127\.0\.0\.1:\d+ .*debug on", log), log
    assert not list(tmp_path.glob("troth-dev-*"))  # the throwaway database is gone


def test_the_server_refuses_to_start_on_a_port_in_use(
    start_server: Callable[..., TrothServer], tmp_path: Path
) -> None:
    running = start_server()
    run = subprocess.run(
        [sys.executable, "-m", "troth", "serve", "--host", "127.0.0.1",
         "--port", str(running.port), "--db", str(tmp_path / "other.db")],
        capture_output=True,
        timeout=20,
    )  # fmt: skip
    assert run.returncode != 0
