"""The two log formats of ``troth serve`` (``troth.server.logs``), line by line: a line
logged while a request is served carries that request's ids (as fields in JSON, appended
in text unless the message shows them), a line that names its own ids keeps them, and a
traceback stays inside its one JSON line. The server-level tests are in test_logs.py.
"""

from __future__ import annotations

import contextvars
import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from troth.protocol.envelope import Request
from troth.protocol.kinds import Kind
from troth.protocol.requests import PromiseGetRequest, TaskAcquireRequest
from troth.protocol.subjects import TASK_ID
from troth.server import logs

log = logging.getLogger("troth.server.rpc")
ACQUIRE = Request(Kind.TASK_ACQUIRE, "c1", TaskAcquireRequest("order-7", 1, "worker-1", 30000))
GET = Request(Kind.PROMISE_GET, "c2", PromiseGetRequest("order-8"))


@pytest.fixture(autouse=True)
def root_logger() -> Iterator[None]:
    """``logs.configure`` replaces the root logger's handlers; put pytest's back after."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def written(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().err.splitlines()


def serving(request: Request, log_lines: Callable[[], None]) -> None:
    """Run ``log_lines`` as ``POST /`` would, in a context of its own (as each request's
    asyncio task has), so the request does not leak into other tests."""

    def run() -> None:
        logs.serving(request)
        log_lines()

    contextvars.copy_context().run(run)


def test_json_lines_carry_the_ids_of_the_request_being_served(capsys: Any) -> None:
    logs.configure("info", "json")
    serving(ACQUIRE, lambda: log.warning("task.acquire lost its retries [error 1f]"))
    serving(GET, lambda: log.warning("about another task", extra={TASK_ID: "order-9"}))
    log.warning("the delivery pass failed")
    acquire, own, outside = (json.loads(line) for line in written(capsys))
    assert acquire["task_id"] == "order-7" and "promise_id" not in acquire
    assert (acquire["level"], acquire["logger"]) == ("WARNING", "troth.server.rpc")
    assert acquire["message"] == "task.acquire lost its retries [error 1f]"
    assert own["task_id"] == "order-9" and "promise_id" not in own  # its own ids win
    assert not {"task_id", "promise_id"} & outside.keys()


def test_text_lines_show_the_ids_their_message_does_not(capsys: Any) -> None:
    logs.configure("info", "text")
    serving(ACQUIRE, lambda: log.warning("task.acquire lost its retries [error 1f]"))
    serving(ACQUIRE, lambda: log.warning("task order-7 was taken"))
    log.warning("the delivery pass failed")
    appended, named, outside = written(capsys)
    assert appended.endswith(
        " WARNING troth.server.rpc: task.acquire lost its retries [error 1f] [task_id=order-7]"
    )
    assert named.endswith(": task order-7 was taken")
    assert outside.endswith(": the delivery pass failed")


def test_a_traceback_stays_inside_its_json_line(capsys: Any) -> None:
    logs.configure("info", "json")

    def fail() -> None:
        try:
            raise RuntimeError("disk I/O error")
        except RuntimeError:
            log.exception("promise.get failed [error 2a]")

    serving(GET, fail)
    (line,) = written(capsys)
    record = json.loads(line)
    assert record["level"] == "ERROR" and record["promise_id"] == "order-8"
    assert "RuntimeError: disk I/O error" in record["exception"]
