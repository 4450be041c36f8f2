"""``GET /poll/{group}/{id}``: SSE framing, keepalive, routing, and holding undelivered messages."""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Callable

import pytest

from tests.support.servers import TrothServer
from tests.support.sse import SseClient
from tests.support.waiting import eventually

# Slow: a troth serve process per test (tests/conformance covers the server in the fast suite).
pytestmark = pytest.mark.slow

FRAME = re.compile(rb"data: [^\n]+\n\n")


def execute_of(message: dict) -> str:
    assert message["kind"] == "execute"
    return message["data"]["task"]["id"]


def test_the_stream_is_200_event_stream_without_caching(
    server: TrothServer, sse: Callable[..., SseClient]
) -> None:
    worker = sse("g", "w1")
    assert worker.status == 200
    assert worker.headers["content-type"] == "text/event-stream"
    assert worker.headers["cache-control"] == "no-cache"


def test_a_frame_is_exactly_data_compact_json_and_a_blank_line(
    server: TrothServer, sse: Callable[..., SseClient]
) -> None:
    worker = sse("g", "w1")
    server.create_promise("p1", tags={"resonate:target": "poll://any@g"})
    frame = worker.chunk()
    while frame.startswith(b":"):
        frame = worker.chunk()
    assert FRAME.fullmatch(frame), frame
    payload = frame[len(b"data: ") : -2]
    message = json.loads(payload)
    assert payload == json.dumps(message, separators=(",", ":")).encode()
    assert message == {
        "kind": "execute",
        "head": {"serverUrl": f"http://127.0.0.1:{server.port}"},
        "data": {"task": {"id": "p1", "version": 0}},
    }


def test_the_server_url_in_execute_messages_is_configurable(
    start_server: Callable[..., TrothServer],
) -> None:
    server = start_server("--server-url", "https://troth.example")
    worker = SseClient(server.port, "g", "w1")
    try:
        server.create_promise("p1", tags={"resonate:target": "poll://any@g"})
        assert worker.message()["head"] == {"serverUrl": "https://troth.example"}
    finally:
        worker.close()


def test_unblock_messages_carry_an_empty_head_and_the_settled_promise(
    server: TrothServer, sse: Callable[..., SseClient]
) -> None:
    listener = sse("g", "w1")
    server.create_promise("p1")
    server.ok("promise.register_listener", {"awaited": "p1", "address": "poll://uni@g/w1"})
    server.ok("promise.settle", {"id": "p1", "state": "resolved", "value": {"data": "42"}})
    message = listener.message()
    assert message["kind"] == "unblock"
    assert message["head"] == {}
    assert message["data"]["promise"]["id"] == "p1"
    assert message["data"]["promise"]["state"] == "resolved"
    assert message["data"]["promise"]["value"] == {"data": "42"}


def test_a_keepalive_comment_goes_out_between_messages(
    start_server: Callable[..., TrothServer],
) -> None:
    server = start_server("--poll-keepalive", "200")
    worker = SseClient(server.port, "g", "w1")
    try:
        assert worker.chunk(timeout=3) == b": keepalive\n\n"
        assert worker.chunk(timeout=3) == b": keepalive\n\n"
    finally:
        worker.close()


def test_delivered_messages_leave_the_outbox(
    server: TrothServer, sse: Callable[..., SseClient]
) -> None:
    worker = sse("g", "w1")
    server.create_promise("p1", tags={"resonate:target": "poll://any@g"})
    assert execute_of(worker.message()) == "p1"
    eventually(lambda: server.snap()["messages"] == [])


def test_anycast_prefers_the_named_connection(
    server: TrothServer, sse: Callable[..., SseClient]
) -> None:
    w1, w2, w3 = sse("g", "w1"), sse("g", "w2"), sse("g", "w3")
    for i in range(6):
        server.create_promise(f"p{i}", tags={"resonate:target": "poll://any@g/w2"})
    assert sorted(execute_of(w2.message()) for _ in range(6)) == [f"p{i}" for i in range(6)]
    w1.no_message(0.3)
    w3.no_message(0.1)


def test_anycast_to_an_absent_id_falls_back_to_the_group(
    server: TrothServer, sse: Callable[..., SseClient]
) -> None:
    w1 = sse("g", "w1")
    sse("other", "w9")  # the right id in the wrong group must not get it
    server.create_promise("p1", tags={"resonate:target": "poll://any@g/w9"})
    assert execute_of(w1.message()) == "p1"


def test_anycast_without_an_id_spreads_over_the_group(
    server: TrothServer, sse: Callable[..., SseClient]
) -> None:
    workers = {"w1": sse("g", "w1"), "w2": sse("g", "w2")}
    for i in range(8):
        server.create_promise(f"p{i}", tags={"resonate:target": "poll://any@g"})
    eventually(lambda: server.snap()["messages"] == [])
    got: Counter[str] = Counter()
    for name, worker in workers.items():
        try:
            while True:
                worker.message(timeout=0.3)
                got[name] += 1
        except TimeoutError:
            pass
    assert sum(got.values()) == 8
    assert got["w1"] > 0 and got["w2"] > 0


def test_unicast_reaches_only_the_named_connection(
    server: TrothServer, sse: Callable[..., SseClient]
) -> None:
    w1, w2 = sse("g", "w1"), sse("g", "w2")
    server.create_promise("p1")
    server.ok("promise.register_listener", {"awaited": "p1", "address": "poll://uni@g/w2"})
    server.ok("promise.settle", {"id": "p1", "state": "resolved"})
    assert w2.message()["data"]["promise"]["id"] == "p1"
    w1.no_message(0.3)


def test_unicast_to_an_absent_id_waits_in_the_outbox_until_it_connects(
    server: TrothServer, sse: Callable[..., SseClient]
) -> None:
    other = sse("g", "w1")
    server.create_promise("p1")
    server.ok("promise.register_listener", {"awaited": "p1", "address": "poll://uni@g/w2"})
    server.ok("promise.settle", {"id": "p1", "state": "resolved"})
    other.no_message(0.5)
    assert [m["address"] for m in server.snap()["messages"]] == ["poll://uni@g/w2"]
    late = sse("g", "w2")
    assert late.message()["data"]["promise"]["id"] == "p1"
    # An unblock counts as delivered once its stream outlived the hold (10 s by default).
    eventually(lambda: server.snap()["messages"] == [], timeout=15)


def test_a_message_enqueued_with_no_connection_is_delivered_once_a_worker_connects(
    server: TrothServer, sse: Callable[..., SseClient]
) -> None:
    server.create_promise("p1", tags={"resonate:target": "poll://any@late"})
    server.create_promise("p2", tags={"resonate:target": "poll://any@late"})
    eventually(lambda: len(server.snap()["messages"]) == 2)
    worker = sse("late", "w1")
    assert sorted(execute_of(worker.message()) for _ in range(2)) == ["p1", "p2"]
    worker.no_message(0.5)  # delivered once, not again
    eventually(lambda: server.snap()["messages"] == [])


def test_a_disconnected_worker_no_longer_takes_messages(
    server: TrothServer, sse: Callable[..., SseClient]
) -> None:
    gone = sse("g", "w1")
    gone.close()
    stays = sse("g", "w2")
    time.sleep(0.3)  # the server notices the closed socket at once; leave it a moment
    for i in range(4):
        server.create_promise(f"p{i}", tags={"resonate:target": "poll://any@g/w1"})
    assert sorted(execute_of(stays.message()) for _ in range(4)) == ["p0", "p1", "p2", "p3"]


def test_connections_beyond_the_limit_answer_503(
    start_server: Callable[..., TrothServer],
) -> None:
    server = start_server("--poll-max-connections", "2")
    first, second = SseClient(server.port, "g", "w1"), SseClient(server.port, "g", "w2")
    try:
        third = SseClient(server.port, "g", "w3")
        assert third.status == 503
        assert third.body == b"Poll registration at capacity"
        third.close()
        first.close()
        # Once a connection goes away its slot is free again.
        def reconnects() -> bool:
            client = SseClient(server.port, "g", "w4")
            client.close()
            return client.status == 200

        eventually(reconnects)
    finally:
        first.close()
        second.close()


def test_group_and_id_are_percent_decoded(
    server: TrothServer, sse: Callable[..., SseClient]
) -> None:
    worker = SseClient(server.port, "", "", path="/poll/my%20group/w%2F1")
    try:
        server.create_promise("p1", tags={"resonate:target": "poll://uni@my%20group/w%2F1"})
        assert execute_of(worker.message()) == "p1"
    finally:
        worker.close()
