"""The server's log, read from a real ``troth serve``: the access log (``--access-log``, and
at ``--log-level debug``), the JSON format (``--log-format json``) for troth's lines and
uvicorn's alike, and the ids of the promise or task a line is about.

Before, the server logged only its startup and shutdown, whatever the level.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

from tests.support.servers import TrothServer

pytestmark = pytest.mark.slow  # server processes

ACCESS = " INFO troth.server.access: "


def some_requests(server: TrothServer) -> None:
    server.create_promise("order-7")
    assert server.call("promise.get", {"id": "order-8"})[0] == 404
    assert server.call("task.get", {"id": "order-7"})[0] == 404
    assert server.http.post("/", json={"kind": "promise.get"}).status_code == 400
    assert server.http.get("/health").status_code == 200


def stopped(server: TrothServer) -> list[str]:
    assert server.terminate() == 0
    return server.output().splitlines()


def test_the_access_log_is_one_line_per_request_with_kind_id_status_and_duration(
    start_server: Callable[..., TrothServer],
) -> None:
    server = start_server("--access-log", "--log-level", "warning", debug=False)
    some_requests(server)
    lines = stopped(server)
    assert not [line for line in lines if "troth serving at" in line]  # INFO is off ...
    access = [line.split(ACCESS, 1)[1] for line in lines if ACCESS in line]  # ... but not here
    served = [line for line in access if not line.startswith("127.0.0.1 GET /ready ")]
    assert len(served) == 5, access
    expected = [
        r"POST / promise\.create promise_id=order-7 200",
        r"POST / promise\.get promise_id=order-8 404",
        r"POST / task\.get task_id=order-7 404",
        r"POST / - 400",  # refused before its kind was known
        r"GET /health - 200",
    ]
    for line, pattern in zip(served, expected, strict=True):
        assert re.fullmatch(rf"127\.0\.0\.1 {pattern} \d+\.\dms", line), line


def test_debug_level_logs_every_request_without_the_flag(
    start_server: Callable[..., TrothServer],
) -> None:
    server = start_server("--log-level", "debug", debug=False)
    server.create_promise("order-7")
    access = [line for line in stopped(server) if ACCESS in line]
    assert sum("POST / promise.create promise_id=order-7 200" in line for line in access) == 1


def test_without_the_flag_requests_are_not_logged(start_server: Callable[..., TrothServer]) -> None:
    server = start_server(debug=False)
    server.create_promise("order-7")
    assert not [line for line in stopped(server) if "troth.server.access" in line]


def test_the_json_format_is_one_object_per_line_with_the_ids_as_fields(
    start_server: Callable[..., TrothServer],
) -> None:
    server = start_server("--log-format", "json", "--access-log", debug=False)
    some_requests(server)
    records: list[dict[str, Any]] = [json.loads(line) for line in stopped(server)]
    for record in records:
        assert {"time", "level", "logger", "message"} <= record.keys(), record
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", record["time"])
    loggers = {record["logger"] for record in records}
    assert {"troth.server.serve", "uvicorn.error", "troth.server.access"} <= loggers
    assert not any("color_message" in record for record in records)
    access = [r for r in records if r["logger"] == "troth.server.access" and r["path"] != "/ready"]
    created, missing, task, bad, health = access
    assert created["promise_id"] == "order-7" and created["kind"] == "promise.create"
    assert (created["method"], created["path"], created["status"]) == ("POST", "/", 200)
    assert isinstance(created["duration_ms"], float) and created["duration_ms"] >= 0
    assert created["client"] == "127.0.0.1" and created["level"] == "INFO"
    assert (missing["promise_id"], missing["status"]) == ("order-8", 404)
    assert (task["task_id"], task["kind"], task["status"]) == ("order-7", "task.get", 404)
    assert "promise_id" not in task
    assert (bad["kind"], bad["status"]) == (None, 400)
    assert (health["path"], health["status"]) == ("/health", 200)


def test_a_bad_log_format_is_refused_naming_it() -> None:
    ran = subprocess.run(
        [sys.executable, "-m", "troth", "serve"],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "TROTH_LOG_FORMAT": "xml"},
    )
    assert ran.returncode == 2
    assert "log format 'xml' is not one of text, json" in ran.stderr
