"""HTTP push: messages to ``http://`` addresses are POSTed, retried, and acked on 2xx only."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from tests.support.push import PushTarget
from tests.support.servers import TrothServer
from tests.support.waiting import eventually

# Slow: a troth serve process per test (tests/conformance covers the server in the fast suite).
pytestmark = pytest.mark.slow


def test_an_execute_is_posted_to_its_target_and_acked_on_2xx(
    server: TrothServer, push_target: PushTarget
) -> None:
    server.create_promise("p1", tags={"resonate:target": push_target.url + "/work"})
    eventually(lambda: push_target.received)
    assert push_target.received == [
        {
            "kind": "execute",
            "head": {"serverUrl": f"http://127.0.0.1:{server.port}"},
            "data": {"task": {"id": "p1", "version": 0}},
        }
    ]
    eventually(lambda: server.snap()["messages"] == [])
    time.sleep(0.3)
    assert len(push_target.attempts) == 1  # acked: not sent again


def test_an_unblock_is_posted_to_a_listener_address(
    server: TrothServer, push_target: PushTarget
) -> None:
    server.create_promise("p1")
    server.ok("promise.register_listener", {"awaited": "p1", "address": push_target.url})
    server.ok("promise.settle", {"id": "p1", "state": "rejected"})
    eventually(lambda: push_target.received)
    (message,) = push_target.received
    assert message["kind"] == "unblock"
    assert message["head"] == {}
    assert message["data"]["promise"]["state"] == "rejected"


def test_a_failing_target_is_retried_with_backoff_and_delivered_when_it_recovers(
    start_server: Callable[..., TrothServer], push_target: PushTarget
) -> None:
    server = start_server(
        "--push-retries", "3", "--push-backoff", "100", "--push-backoff-max", "400",
        "--delivery-interval", "100",
    )  # fmt: skip
    push_target.fail_with = 503
    server.create_promise("p1", tags={"resonate:target": push_target.url})
    eventually(lambda: len(push_target.attempts) >= 5, timeout=10)
    # Still undelivered, so still in the outbox.
    assert [m["address"] for m in server.snap()["messages"]] == [push_target.url]
    gaps = [b - a for a, b in zip(push_target.attempts, push_target.attempts[1:], strict=False)]
    # Within a round the waits double from 100 ms; every wait is at least the first backoff.
    assert gaps[0] >= 0.09 and gaps[1] >= 0.18, gaps
    assert all(gap >= 0.09 for gap in gaps), gaps
    push_target.fail_with = None
    eventually(lambda: push_target.received, timeout=10)
    assert push_target.received[0]["data"]["task"]["id"] == "p1"
    eventually(lambda: server.snap()["messages"] == [])


def test_an_unreachable_target_keeps_the_message_in_the_outbox(
    start_server: Callable[..., TrothServer],
) -> None:
    server = start_server("--push-retries", "2", "--push-backoff", "50", "--push-timeout", "500")
    server.create_promise("p1", tags={"resonate:target": "http://127.0.0.1:9/unreachable"})
    time.sleep(1)
    assert [m["address"] for m in server.snap()["messages"]] == ["http://127.0.0.1:9/unreachable"]
    assert server.http.get("/ready").status_code == 200
