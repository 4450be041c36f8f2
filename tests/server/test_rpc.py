"""``POST /`` refuses bad input without writing anything, and keeps serving."""

from __future__ import annotations

import socket
from collections.abc import Callable

import pytest

from tests.support.servers import FAR, TrothServer

# Slow: a troth serve process per test (tests/conformance covers the server in the fast suite).
pytestmark = pytest.mark.slow

JSON = {"content-type": "application/json"}
EMPTY_SNAP = {
    "promises": [],
    "promiseTimeouts": [],
    "callbacks": [],
    "listeners": [],
    "tasks": [],
    "taskTimeouts": [],
    "messages": [],
    "schedules": [],
    "scheduleTimeouts": [],
}


MALFORMED = [
    b"",
    b"{not json",
    b"[]",
    b'{"kind":"promise.create","head":{"corrId":"c","version":"2026-04-01"},"data":[]}',
    b'{"kind":"promise.create","head":{"corrId":"c","version":"1999-01-01"},"data":{}}',
    b'{"kind":"promise.create","head":{"corrId":"c","version":"2026-04-01"},"data":{"id":"x"}}',
    b'{"kind":"no.such","head":{"corrId":"c","version":"2026-04-01"},"data":{}}',
]


def test_malformed_requests_answer_400_write_nothing_and_the_server_keeps_serving(
    server: TrothServer,
) -> None:
    for body in MALFORMED:
        response = server.http.post("/", content=body, headers=JSON)
        assert response.status_code == 400, body
        envelope = response.json()
        assert envelope["head"]["status"] == 400
        assert isinstance(envelope["data"], str)
        assert server.snap() == EMPTY_SNAP
    server.create_promise("after")
    assert [p["id"] for p in server.snap()["promises"]] == ["after"]


def test_a_400_names_the_kind_and_corr_id_when_they_can_be_read(server: TrothServer) -> None:
    body = b'{"kind":"promise.create","head":{"corrId":"c9","version":"2026-04-01"},"data":{}}'
    envelope = server.http.post("/", content=body, headers=JSON).json()
    assert (envelope["kind"], envelope["head"]["corrId"]) == ("promise.create", "c9")


def test_an_oversized_body_answers_413_and_writes_nothing(
    start_server: Callable[..., TrothServer],
) -> None:
    server = start_server("--max-body-bytes", "1000")
    big = {"id": "big", "timeoutAt": FAR, "param": {"data": "x" * 2000}}
    response = server.send("promise.create", big)
    assert response.status_code == 413
    assert b"1000 bytes" in response.content
    assert server.snap()["promises"] == []
    server.create_promise("small")
    assert [p["id"] for p in server.snap()["promises"]] == ["small"]


def test_an_oversized_chunked_body_is_refused_without_reading_it_all(
    start_server: Callable[..., TrothServer],
) -> None:
    server = start_server("--max-body-bytes", "1000")
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(
            b"POST / HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n" + b"%x\r\n" % 1500 + b"x" * 1500 + b"\r\n"
        )
        # The client never finishes its body; the server answers anyway.
        reply = sock.recv(4096)
    assert reply.startswith(b"HTTP/1.1 413")
    assert server.http.get("/health").status_code == 200


def test_the_default_body_limit_is_2_mib(server: TrothServer) -> None:
    fits = {"id": "fits", "timeoutAt": FAR, "param": {"data": "x" * (2 * 1024 * 1024 - 500)}}
    assert server.send("promise.create", fits).status_code == 200
    too_big = {"id": "too-big", "timeoutAt": FAR, "param": {"data": "x" * (2 * 1024 * 1024)}}
    assert server.send("promise.create", too_big).status_code == 413


def test_debug_kinds_answer_403_without_debug_mode(
    start_server: Callable[..., TrothServer],
) -> None:
    server = start_server(debug=False)
    for kind in ["debug.start", "debug.stop", "debug.reset", "debug.snap"]:
        assert server.call(kind) == (403, "Debug operations are disabled")
    assert server.call("debug.tick", {"time": 1}) == (403, "Debug operations are disabled")


def test_debug_time_is_ignored_without_debug_mode(
    start_server: Callable[..., TrothServer],
) -> None:
    server = start_server(debug=False)
    promise = server.create_promise("p", **{"resonate:debug_time": 5})
    assert promise["createdAt"] > 1_000_000_000_000


def test_debug_time_is_now_in_debug_mode(server: TrothServer) -> None:
    promise = server.create_promise("p", **{"resonate:debug_time": 5})
    assert promise["createdAt"] == 5


def test_debug_reset_empties_everything(server: TrothServer) -> None:
    server.create_promise("p", tags={"resonate:target": "poll://any@nobody"})
    assert server.snap() != EMPTY_SNAP
    assert server.ok("debug.reset") == {}
    assert server.snap() == EMPTY_SNAP


def test_debug_tick_answers_an_empty_array(server: TrothServer) -> None:
    assert server.ok("debug.tick", {"time": 5}) == []


def test_debug_tick_refuses_a_debug_time_other_than_its_time(server: TrothServer) -> None:
    status, body = server.call("debug.tick", {"time": 5}, **{"resonate:debug_time": 6})
    assert (status, body) == (400, "resonate:debug_time must equal data.time")
