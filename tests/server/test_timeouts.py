"""The timeouts loop fires stored deadlines in wall-clock time; debug.start pauses it."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from tests.support.servers import TrothServer, now_ms
from tests.support.sse import SseClient
from tests.support.waiting import eventually

# Slow: a troth serve process per test (tests/conformance covers the server in the fast suite).
pytestmark = pytest.mark.slow


def stored_state(server: TrothServer, id: str) -> str:
    """The promise's state as stored (debug.snap does not project deadlines)."""
    (promise,) = [p for p in server.snap()["promises"] if p["id"] == id]
    return promise["state"]


def test_a_targeted_promise_times_out_in_wall_clock_time(server: TrothServer) -> None:
    server.create_promise("p1", now_ms() + 300, tags={"resonate:target": "poll://any@nobody"})
    assert stored_state(server, "p1") == "pending"
    eventually(lambda: stored_state(server, "p1") == "rejected_timedout", timeout=3)
    snap = server.snap()
    assert snap["promiseTimeouts"] == []
    assert [t["state"] for t in snap["tasks"]] == ["fulfilled"]


def test_a_timer_promise_resolves_in_wall_clock_time(server: TrothServer) -> None:
    server.create_promise("sleep", now_ms() + 200, tags={"resonate:timer": "true"})
    eventually(lambda: stored_state(server, "sleep") == "resolved", timeout=3)


def test_a_deadline_armed_while_the_loop_sleeps_fires_on_time(server: TrothServer) -> None:
    # The loop is asleep towards a far deadline; a new, earlier one must wake it.
    server.create_promise("far", now_ms() + 60_000, tags={"resonate:timer": "true"})
    time.sleep(0.2)
    server.create_promise("near", now_ms() + 100, tags={"resonate:timer": "true"})
    # Fired within 10 s, not at the far deadline a minute away: on time, on a loaded machine.
    eventually(lambda: stored_state(server, "near") == "resolved", timeout=10, interval=0.02)


def test_debug_start_pauses_the_loop_and_debug_tick_fires(server: TrothServer) -> None:
    assert server.ok("debug.start") == {}
    due = now_ms() + 100
    server.create_promise("p1", due, tags={"resonate:target": "poll://any@nobody"})
    time.sleep(1.5)
    assert stored_state(server, "p1") == "pending"
    assert server.ok("debug.tick", {"time": due}) == []
    assert stored_state(server, "p1") == "rejected_timedout"


def test_debug_stop_resumes_the_loop(server: TrothServer) -> None:
    server.ok("debug.start")
    server.create_promise("p1", now_ms() + 100, tags={"resonate:timer": "true"})
    time.sleep(1.2)
    assert stored_state(server, "p1") == "pending"
    assert server.ok("debug.stop") == {}
    eventually(lambda: stored_state(server, "p1") == "resolved", timeout=3)


def test_an_unclaimed_task_is_offered_again_after_the_retry_timeout(
    start_server: Callable[..., TrothServer],
) -> None:
    server = start_server("--tasks-retry-timeout", "300")
    worker = SseClient(server.port, "g", "w1")
    try:
        server.create_promise("p1", tags={"resonate:target": "poll://any@g"})
        first = worker.message()
        start = time.monotonic()
        again = worker.message(timeout=3)
        assert again == first  # the same task at the same version
        assert time.monotonic() - start >= 0.2
    finally:
        worker.close()
