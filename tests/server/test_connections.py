"""Connection hygiene, tried as an attacker would against a real ``troth serve``: half-sent
requests (slowloris) at a low file-descriptor limit, oversized heads, clients that never read
their responses, more connections than the cap, and a client over its rate limit. Each time
the server stays bounded and other clients are still served."""

from __future__ import annotations

import json
import resource
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.processes import rss_mb
from tests.support.servers import BACKENDS, FAR, VERSION, TrothServer, serve
from tests.support.sse import SseClient
from tests.support.waiting import eventually

# Slow: a troth serve process per test (tests/conformance covers the server in the fast suite).
pytestmark = pytest.mark.slow

HALF_SENT = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"  # no blank line


def closed_by_peer(sock: socket.socket, within: float) -> bool:
    """Whether the server ends the connection within ``within`` seconds (reading and
    dropping whatever it sent before)."""
    deadline = time.monotonic() + within
    while (left := deadline - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            if not sock.recv(65536):
                return True
        except TimeoutError:
            return False
        except ConnectionError:
            return True
    return False


def served(server: TrothServer, within: float) -> bool:
    """Whether a new client gets its answer within ``within`` seconds."""
    try:
        return httpx.get(f"{server.url}/health", timeout=within).status_code == 200
    except httpx.HTTPError:
        return False


def envelope(kind: str, data: dict[str, object]) -> bytes:
    head = {"corrId": "c1", "version": VERSION}
    return json.dumps({"kind": kind, "head": head, "data": data}).encode()


def post(body: bytes) -> bytes:
    return (
        b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    )


@pytest.fixture
def sockets() -> Iterator[list[socket.socket]]:
    opened: list[socket.socket] = []
    yield opened
    for sock in opened:
        sock.close()


def connect(server: TrothServer, opened: list[socket.socket], rcvbuf: int = 0) -> socket.socket:
    sock = socket.socket()
    if rcvbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.connect(("127.0.0.1", server.port))
    opened.append(sock)
    return sock


@pytest.mark.parametrize("backend", BACKENDS)
def test_slowloris_at_a_low_fd_limit_does_not_lock_out_new_clients(
    tmp_path: Path, sockets: list[socket.socket], backend: str
) -> None:
    def limit_fds() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))

    flags = ("--request-read-timeout", "2000")
    with serve(backend, tmp_path, *flags, debug=False, preexec_fn=limit_fds) as server:
        # More half-sent requests than the server has file descriptors.
        for _ in range(400):
            connect(server, sockets).sendall(HALF_SENT)
        started = time.monotonic()
        assert served(server, within=3)
        assert time.monotonic() - started < 3
        assert server.create_promise("p1")["id"] == "p1"
        # The attackers' connections were closed: at the cap to make room, the rest once
        # the read timeout passed.
        assert all(closed_by_peer(sock, within=4) for sock in sockets)
        assert "to make room at the connection cap" in server.output()  # said, in summary


def test_a_request_must_arrive_within_the_read_timeout_but_a_stream_may_stay(
    start_server: Callable[..., TrothServer], sockets: list[socket.socket]
) -> None:
    server = start_server("--request-read-timeout", "1500", "--poll-keepalive", "300")
    stream = SseClient(server.port, "g", "w1")
    silent = connect(server, sockets)  # opens and sends nothing
    slow_head = connect(server, sockets)
    slow_head.sendall(HALF_SENT)
    slow_body = connect(server, sockets)
    slow_body.sendall(post(b"{" * 100)[:-90])  # a complete head, a tenth of its body
    started = time.monotonic()
    for sock in (silent, slow_head, slow_body):
        assert closed_by_peer(sock, within=5)
    assert 1.4 < time.monotonic() - started < 5
    # The SSE stream is being answered, not read from: it is not timed out.
    try:
        stream.no_message(0.5)  # keepalives still arrive: the stream is alive
    finally:
        stream.close()
    assert served(server, within=2)


def test_an_oversized_request_head_is_refused_with_431(
    server: TrothServer, sockets: list[socket.socket]
) -> None:
    sock = connect(server, sockets)
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Filler: " + b"a" * 100_000 + b"\r\n")
    sock.settimeout(5)
    assert sock.recv(100).startswith(b"HTTP/1.1 431 ")
    assert closed_by_peer(sock, within=2)


def test_at_the_connection_cap_busy_streams_are_kept_and_a_new_client_gets_503(
    start_server: Callable[..., TrothServer], sockets: list[socket.socket]
) -> None:
    server = start_server("--max-connections", "3")
    streams = [SseClient(server.port, "g", f"w{i}") for i in range(3)]
    try:
        refused = connect(server, sockets)
        refused.settimeout(5)
        assert refused.recv(100).startswith(b"HTTP/1.1 503 ")
        for stream in streams:
            stream.no_message(0.2)  # still open
        streams.pop().close()
        eventually(lambda: served(server, within=2), timeout=5)
    finally:
        for stream in streams:
            stream.close()


def test_at_the_connection_cap_the_slowest_sender_makes_room(
    start_server: Callable[..., TrothServer], sockets: list[socket.socket]
) -> None:
    server = start_server("--max-connections", "4")
    waiting = [connect(server, sockets) for _ in range(4)]
    for sock in waiting:
        sock.sendall(HALF_SENT)
    time.sleep(0.2)
    assert served(server, within=2)  # the oldest half-sent request was closed for it
    assert closed_by_peer(waiting[0], within=2)


def large_promise(server: TrothServer, size: int = 1_500_000) -> bytes:
    """A promise whose answer is ``size`` bytes; the raw ``promise.get`` request for it."""
    server.ok("promise.create", {"id": "big", "timeoutAt": FAR, "param": {"data": "x" * size}})
    return post(envelope("promise.get", {"id": "big"}))


@pytest.mark.parametrize("backend", BACKENDS)
def test_clients_that_never_read_do_not_grow_the_server_without_bound(
    tmp_path: Path,
    sockets: list[socket.socket],
    backend: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # glibc otherwise keeps freed large buffers in its heap: RSS would lag behind memory in use.
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "131072")
    with serve(backend, tmp_path, "--write-timeout", "3000") as server:
        never_read(server, sockets)


def never_read(server: TrothServer, sockets: list[socket.socket]) -> None:
    assert server.process is not None
    pid = server.process.pid
    request = large_promise(server)
    baseline = rss_mb(pid)
    # 100 connections, each asking for eight 1.5 MB answers and reading none: 1.2 GB of
    # answers, which the server used to build and keep for as long as the clients stayed.
    for _ in range(100):
        connect(server, sockets, rcvbuf=4096).sendall(request * 8)
    peak = baseline
    deadline = time.monotonic() + 6
    while time.monotonic() < deadline:
        peak = max(peak, rss_mb(pid))
        time.sleep(0.2)
    assert served(server, within=2)
    # Each connection holds at most one unread answer, and only for the write timeout.
    assert peak - baseline < 300, (baseline, peak)
    assert all(closed_by_peer(sock, within=5) for sock in sockets)
    eventually(lambda: rss_mb(pid) - baseline < 100, timeout=10)
    assert "response not read within the write timeout" in server.output()


def test_unread_answers_beyond_the_budget_close_the_slowest_readers_first(
    start_server: Callable[..., TrothServer], sockets: list[socket.socket]
) -> None:
    server = start_server("--max-buffered-bytes", "1000000", "--write-timeout", "60000")
    request = large_promise(server)
    for _ in range(20):
        connect(server, sockets, rcvbuf=4096).sendall(request * 4)
    # Long before the write timeout: some were closed to keep within the budget.
    eventually(lambda: "exceeded the budget" in server.output(), timeout=15)
    assert served(server, within=2)


def test_a_client_over_its_rate_limit_gets_429_with_retry_after(
    start_server: Callable[..., TrothServer],
) -> None:
    server = start_server("--rate-limit", "5")
    time.sleep(1)  # the bucket refills from the harness's readiness checks
    with httpx.Client(base_url=server.url, timeout=5) as client:
        statuses = [client.get("/health") for _ in range(20)]
        limited = [r for r in statuses if r.status_code == 429]
        assert statuses[0].status_code == 200
        assert len(limited) >= 10
        assert int(limited[0].headers["retry-after"]) >= 1
        # Another client address has a bucket of its own.
        other = httpx.HTTPTransport(local_address="127.0.0.2")
        with httpx.Client(base_url=server.url, transport=other, timeout=5) as neighbour:
            assert neighbour.get("/health").status_code == 200
        time.sleep(int(limited[-1].headers["retry-after"]))
        assert client.get("/health").status_code == 200


def test_without_a_rate_limit_nothing_is_limited(server: TrothServer) -> None:
    with httpx.Client(base_url=server.url, timeout=5) as client:
        assert all(client.get("/health").status_code == 200 for _ in range(50))
