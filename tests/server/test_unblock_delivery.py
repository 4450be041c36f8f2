"""At-least-once delivery of unblocks over SSE (docs/delivery.md).

Nothing re-sends an unblock the way a task retry re-sends an execute, so an unblock written
into the socket of a worker that then dies must not count as delivered. These tests stall a
worker's stream (it stops reading), have unblocks written into it, kill it (a reset, its
unread bytes gone), and check that everything arrives once it reconnects; and that what a
worker did receive is not sent again.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.support.servers import TrothServer
from tests.support.sse import SseClient
from tests.support.waiting import eventually

# Slow: a troth serve process per test (tests/conformance covers the server in the fast suite).
pytestmark = pytest.mark.slow

ADDRESS = "poll://uni@g/w1"


def settle_with_listeners(server: TrothServer, ids: list[str]) -> None:
    """Create each promise, register a listener for w1 on it, then settle them all."""

    def one(id: str) -> None:
        server.create_promise(id)
        server.ok("promise.register_listener", {"awaited": id, "address": ADDRESS})

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(one, ids))
        list(pool.map(lambda id: server.ok("promise.settle", {"id": id, "state": "resolved"}), ids))


def stalled(server: TrothServer, query: str = "") -> SseClient:
    """w1's stream, opened and then never read: a small receive buffer, as a busy process."""
    client = SseClient(server.port, "g", "w1", path=f"/poll/g/w1{query}")
    client.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    return client


def unblocked(client: SseClient, count: int, timeout: float = 30) -> set[str]:
    seen: set[str] = set()
    deadline = time.monotonic() + timeout
    while len(seen) < count:
        message = client.message(max(0.001, deadline - time.monotonic()))
        assert message["kind"] == "unblock", message
        seen.add(message["data"]["promise"]["id"])
    return seen


def stalled_then_dead(server: TrothServer, count: int) -> None:
    ids = [f"p{i}" for i in range(count)]
    worker = stalled(server)
    settle_with_listeners(server, ids)
    time.sleep(1.0)  # the server writes what the socket takes
    worker.kill()
    again = SseClient(server.port, "g", "w1")
    try:
        assert unblocked(again, count) == set(ids)
        again.no_message(0.5)
    finally:
        again.close()


def test_unblocks_written_into_a_stalled_stream_that_dies_arrive_after_it_reconnects(
    server: TrothServer,
) -> None:
    stalled_then_dead(server, 200)


def test_two_thousand_unblocks_survive_a_stalled_then_dead_stream(server: TrothServer) -> None:
    stalled_then_dead(server, 2000)


def test_a_stream_keeps_its_unblocks_held_until_it_outlives_the_hold(
    start_server: Callable[..., TrothServer],
) -> None:
    server = start_server("--poll-unblock-hold", "1000")
    worker = SseClient(server.port, "g", "w1")
    settle_with_listeners(server, ["a", "b"])
    assert unblocked(worker, 2) == {"a", "b"}
    assert len(server.snap()["messages"]) == 2  # written, not yet confirmed
    eventually(lambda: server.snap()["messages"] == [])
    worker.close()
    later = SseClient(server.port, "g", "w1")
    later.no_message(1.0)  # confirmed ones are not sent again
    later.close()


def test_a_stream_that_acknowledges_gets_again_only_what_it_did_not_acknowledge(
    server: TrothServer,
) -> None:
    ids = [f"p{i}" for i in range(20)]
    worker = SseClient(server.port, "g", "w1", path="/poll/g/w1?ack=1")
    settle_with_listeners(server, ids)
    frames = dict(worker.numbered() for _ in ids)
    assert sorted(frames) == list(range(1, 21))
    assert worker.ack(server.port, "g", "w1", 10) == 204
    acknowledged = {frames[n]["data"]["promise"]["id"] for n in range(1, 11)}
    eventually(lambda: len(server.snap()["messages"]) == 10)
    worker.kill()

    again = SseClient(server.port, "g", "w1", path="/poll/g/w1?ack=1")
    resent = dict(again.numbered() for _ in range(10))
    assert {m["data"]["promise"]["id"] for m in resent.values()} == set(ids) - acknowledged
    assert again.ack(server.port, "g", "w1", max(resent)) == 204
    eventually(lambda: server.snap()["messages"] == [])
    again.close()


def test_an_acknowledgement_for_an_unknown_stream_is_refused(server: TrothServer) -> None:
    worker = SseClient(server.port, "g", "w1", path="/poll/g/w1?ack=1")
    worker.headers["troth-stream"] = "forged"
    assert worker.ack(server.port, "g", "w1", 1) == 404
    import httpx

    bad = httpx.post(
        f"{server.url}/poll/g/w1", content=b"{}", headers={"content-type": "application/json"}
    )
    assert bad.status_code == 400
    worker.close()


def test_a_stream_that_does_not_acknowledge_in_time_is_closed_and_its_unblocks_sent_again(
    start_server: Callable[..., TrothServer],
) -> None:
    server = start_server("--poll-unblock-hold", "1000")
    ids = [f"p{i}" for i in range(20)]
    worker = SseClient(server.port, "g", "w1", path="/poll/g/w1?ack=1")
    settle_with_listeners(server, ids)
    got = {m["data"]["promise"]["id"] for _, m in (worker.numbered() for _ in ids)}
    assert got == set(ids)
    # Never acknowledged: the server takes the stream for stalled and ends it.
    with pytest.raises(EOFError):
        while True:
            worker.chunk(timeout=5)
    assert "not acknowledged within 1.0 s" in server.output()
    again = SseClient(server.port, "g", "w1", path="/poll/g/w1?ack=1")
    assert {m["data"]["promise"]["id"] for _, m in (again.numbered() for _ in ids)} == set(ids)
    again.close()


def test_a_stream_that_stops_reading_is_closed_and_loses_nothing(
    start_server: Callable[..., TrothServer],
) -> None:
    server = start_server("--poll-write-timeout", "1000")
    stuck = stalled(server)
    ids = [f"p{i}" for i in range(40)]
    big = {"data": "x" * 200_000}  # 8 MB of unblocks: more than the socket buffers hold

    def one(id: str) -> None:
        server.create_promise(id)
        server.ok("promise.register_listener", {"awaited": id, "address": ADDRESS})
        server.ok("promise.settle", {"id": id, "state": "resolved", "value": big})

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(one, ids))
    eventually(lambda: "closing the poll stream of g/w1" in server.output(), timeout=15)
    stuck.kill()
    again = SseClient(server.port, "g", "w1")
    try:
        assert unblocked(again, len(ids)) == set(ids)
    finally:
        again.close()
