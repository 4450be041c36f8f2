"""What the server acknowledged survives ``kill -9``; deadlines missed while down fire after."""

from __future__ import annotations

import time

import pytest

from tests.support.servers import FAR, TrothServer, now_ms
from tests.support.sse import SseClient
from tests.support.waiting import eventually

# Slow: a troth serve process per test (tests/conformance covers the server in the fast suite).
pytestmark = pytest.mark.slow


def test_acknowledged_writes_survive_kill_9(server: TrothServer) -> None:
    server.create_promise("kept", tags={"resonate:target": "poll://any@nobody"})
    server.create_promise("settled")
    server.ok("promise.settle", {"id": "settled", "state": "resolved", "value": {"data": "x"}})
    server.ok("promise.register_listener", {"awaited": "kept", "address": "poll://uni@g/w1"})
    before = server.snap()
    server.restart()  # SIGKILL, then start again on the same database
    assert server.snap() == before
    settled = server.ok("promise.get", {"id": "settled"})["promise"]
    assert (settled["state"], settled["value"]) == ("resolved", {"data": "x"})


def test_undelivered_messages_survive_kill_9_and_are_delivered_after_restart(
    server: TrothServer,
) -> None:
    server.create_promise("p1", tags={"resonate:target": "poll://any@late"})
    server.restart()
    worker = SseClient(server.port, "late", "w1")
    try:
        message = worker.message()
        assert message["data"]["task"] == {"id": "p1", "version": 0}
        eventually(lambda: server.snap()["messages"] == [])
    finally:
        worker.close()


def test_deadlines_that_passed_while_the_server_was_down_fire_after_restart(
    server: TrothServer,
) -> None:
    deadline = now_ms() + 800
    server.create_promise("p1", deadline, tags={"resonate:target": "poll://any@nobody"})
    server.create_promise("sleep", deadline, tags={"resonate:timer": "true"})
    server.kill()
    time.sleep(max(0, deadline - now_ms()) / 1000 + 0.3)
    server.start()

    def stored() -> dict[str, str]:
        return {p["id"]: p["state"] for p in server.snap()["promises"]}

    eventually(lambda: stored() == {"p1": "rejected_timedout", "sleep": "resolved"}, timeout=3)
    assert server.snap()["promiseTimeouts"] == []


def test_a_schedule_catches_up_on_occurrences_missed_while_down(server: TrothServer) -> None:
    server.ok(
        "schedule.create",
        {
            "id": "tick",
            "cron": "* * * * * *",  # every second
            "promiseId": "tick.{{.timestamp}}",
            "promiseTimeout": FAR,
            "promiseTags": {"resonate:target": "poll://any@nobody"},
        },
    )
    server.kill()
    time.sleep(2.5)
    server.start()

    def occurrences() -> list[str]:
        return [p["id"] for p in server.snap()["promises"] if p["id"].startswith("tick.")]

    assert len(eventually(lambda: len(occurrences()) >= 2 and occurrences(), timeout=3)) >= 2
