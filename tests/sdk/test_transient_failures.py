"""Transient failures between the SDK and the server are retried, not fatal.

No answer (connection refused or reset, a timeout), 429 and 502/503/504 are retried with
backoff by every request, for up to ``request_retry``; a server killed with SIGKILL and restarted
a few seconds later on the same database delays the callers and steps, fails none of them,
and runs no finished step again.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path

import pytest

from tests.support.ports import free_port
from tests.support.servers import TrothServer
from troth.protocol.requests import PromiseGetRequest
from troth.sdk import Context, Troth
from troth.sdk.clock import WallClock
from troth.sdk.errors import NetworkError
from troth.sdk.http import HttpNetwork

pytestmark = pytest.mark.anyio

PROMISE = {
    "id": "p1", "state": "resolved", "param": {}, "value": {"data": "MQ=="},
    "tags": {}, "timeoutAt": 10, "createdAt": 1, "settledAt": 5,
}  # fmt: skip

Answer = Callable[[str, str], tuple[int, dict[str, str], bytes]]


async def fake_server(answer: Answer, port: int = 0) -> tuple[asyncio.Server, str]:
    """An HTTP/1.1 server on a free port whose answer to each envelope ``answer`` decides."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                request = json.loads(await reader.readexactly(length))
                status, headers, body = answer(request["kind"], request["head"]["corrId"])
                lines = [f"HTTP/1.1 {status} X", f"Content-Length: {len(body)}"]
                lines += [f"{name}: {value}" for name, value in headers.items()]
                writer.write("\r\n".join(lines).encode() + b"\r\n\r\n" + body)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", port, reuse_address=True)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}"


def envelope(kind: str, cid: str, status: int, data: object) -> bytes:
    head = {"corrId": cid, "status": status, "version": "2026-04-01"}
    return json.dumps({"kind": kind, "head": head, "data": data}).encode()


def network(url: str, request_retry_ms: int) -> HttpNetwork:
    return HttpNetwork(url, "g", "pid", WallClock(), request_retry_ms=request_retry_ms)


async def test_a_503_with_retry_after_is_sent_again_after_the_pause_it_asks_for():
    answered: list[int] = []

    def answer(kind: str, cid: str) -> tuple[int, dict[str, str], bytes]:
        status = 503 if len(answered) < 2 else 200
        answered.append(status)
        if status == 503:
            return 503, {"Retry-After": "0.3"}, envelope(kind, cid, 503, "retry")
        return 200, {}, envelope(kind, cid, 200, {"promise": PROMISE})

    server, url = await fake_server(answer)
    net = network(url, request_retry_ms=10_000)
    try:
        began = time.monotonic()
        status, body = await net.send("promise.get", PromiseGetRequest("p1"))
        elapsed = time.monotonic() - began
    finally:
        await net.stop()
        server.close()
    assert status == 200 and body.promise.id == "p1"
    assert answered == [503, 503, 200]
    assert elapsed >= 0.55  # the two pauses the server asked for


async def test_a_429_of_the_rate_limit_is_sent_again_after_its_retry_after():
    answered: list[int] = []

    def answer(kind: str, cid: str) -> tuple[int, dict[str, str], bytes]:
        status = 429 if not answered else 200
        answered.append(status)
        if status == 429:  # as troth serve --rate-limit answers: plain text, not an envelope
            return 429, {"Retry-After": "0.2"}, b"Too many requests: the limit is 5 per second"
        return 200, {}, envelope(kind, cid, 200, {"promise": PROMISE})

    server, url = await fake_server(answer)
    net = network(url, request_retry_ms=10_000)
    try:
        status, body = await net.send("promise.get", PromiseGetRequest("p1"))
    finally:
        await net.stop()
        server.close()
    assert status == 200 and body.promise.id == "p1"
    assert answered == [429, 200]


@pytest.mark.slow  # waits out real retry backoffs: over a second
async def test_a_refused_connection_is_retried_until_the_server_listens():
    port = free_port()
    net = network(f"http://127.0.0.1:{port}", request_retry_ms=10_000)

    def answer(kind: str, cid: str) -> tuple[int, dict[str, str], bytes]:
        return 200, {}, envelope(kind, cid, 200, {"promise": PROMISE})

    async def listen_later() -> asyncio.Server:
        await asyncio.sleep(1.0)
        return (await fake_server(answer, port))[0]

    late = asyncio.ensure_future(listen_later())
    try:
        began = time.monotonic()
        status, _ = await net.send("promise.get", PromiseGetRequest("p1"))
        elapsed = time.monotonic() - began
    finally:
        await net.stop()
        (await late).close()
    assert status == 200
    assert elapsed >= 0.9  # it waited for the server rather than failing at once


@pytest.mark.slow  # waits out real retry backoffs: over a second
async def test_no_answer_fails_after_the_configured_bound_not_at_once_and_not_for_ever():
    app = Troth(url=f"http://127.0.0.1:{free_port()}", request_retry=timedelta(seconds=1.5))
    try:
        began = time.monotonic()
        with pytest.raises(NetworkError, match="ConnectionRefusedError"):
            await app.promises.get("anything")
        elapsed = time.monotonic() - began
    finally:
        await app.stop()
    assert 1.4 <= elapsed < 15


@pytest.mark.slow  # waits out real retry backoffs: over a second
async def test_a_5xx_that_persists_is_returned_after_the_bound_and_the_log_is_summarized(
    caplog: pytest.LogCaptureFixture,
):
    answered: list[int] = []

    def answer(kind: str, cid: str) -> tuple[int, dict[str, str], bytes]:
        answered.append(503)
        return 503, {"Retry-After": "0.05"}, envelope(kind, cid, 503, "busy")

    server, url = await fake_server(answer)
    net = network(url, request_retry_ms=1000)
    try:
        with caplog.at_level(logging.WARNING, logger="troth.sdk"):
            began = time.monotonic()
            status, message = await net.send("promise.get", PromiseGetRequest("p1"))
            elapsed = time.monotonic() - began
    finally:
        await net.stop()
        server.close()
    assert (status, message) == (503, "busy")
    assert 0.95 <= elapsed < 10
    assert len(answered) >= 10  # retried all along ...
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert 1 <= len(warnings) <= 2  # ... but warned once (plus at most one summary)
    assert "promise.get" in warnings[0].getMessage() and "503" in warnings[0].getMessage()


# -- a real server killed and restarted mid-run -----------------------------------------------


async def step(ledger: str, label: str, seconds: float) -> str:
    await asyncio.sleep(seconds)
    with open(ledger, "a") as f:
        f.write(label + "\n")
    return label


async def pipeline(ctx: Context, ledger: str, name: str, steps: int) -> list[str]:
    done = []
    for i in range(steps):
        done.append(await ctx.run(step, ledger, f"{name}.{i}", 0.25))
    return done


async def wait_until(condition: Callable[[], bool], seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


@pytest.mark.slow  # a troth serve process, killed and restarted
async def test_a_server_killed_and_restarted_mid_run_fails_no_caller_and_repeats_no_step(
    start_server: Callable[..., TrothServer], tmp_path: Path
):
    server = start_server()
    ledger = tmp_path / "ledger"
    group = f"g{uuid.uuid4().hex[:8]}"
    app = Troth(url=server.url, group=group)
    app.register(pipeline)
    caller = Troth(url=server.url, group=f"{group}-callers")
    names = [f"run{i}" for i in range(6)]
    steps = 8
    async with app:
        handles = [app.run(n, pipeline, str(ledger), n, steps) for n in names]
        results: list[Awaitable[list[str]]] = [asyncio.ensure_future(h.result()) for h in handles]
        lines = lambda: ledger.read_text().splitlines() if ledger.exists() else []  # noqa: E731
        # Every run is mid-way: it has recorded a step, and it exists.
        await wait_until(lambda: {line.split(".")[0] for line in lines()} == set(names))
        # A second process's callers, polling (not started: no message stream).
        results += [asyncio.ensure_future(caller.get(n).result()) for n in names]
        server.kill()
        killed_at = len(lines())
        await asyncio.sleep(3)
        await asyncio.to_thread(server.start)  # the same port and database
        outcomes = await asyncio.wait_for(
            asyncio.gather(*results, return_exceptions=True), timeout=60
        )
    await caller.stop()
    assert killed_at < len(names) * steps  # the outage did hit mid-run
    expected = {n: [f"{n}.{i}" for i in range(steps)] for n in names}
    assert outcomes == [expected[n] for n in names] * 2
    counts = Counter(lines())
    assert counts == Counter(label for labels in expected.values() for label in labels)
