"""A minimal keep-alive HTTP/1.1 load generator for the benchmarks.

httpx costs more CPU per request than the server under test, which on a 2-core machine
would make the client the bottleneck. This speaks just enough HTTP/1.1 (POST with
Content-Length; responses with Content-Length, which both servers under test always send)
over raw asyncio protocols on uvloop, and runs in processes of its own so the server's
process never shares an interpreter with its load.

An *operation* is a short fixed sequence of requests one connection sends back to back
(create then settle); each request is one round trip. The run is closed-loop: every
connection has exactly one request in flight, so ``connections`` is the concurrency.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

# One operation for connection-unique number ``n``: the bodies of its requests, in order.
Scenario = Callable[[str], Sequence[bytes]]


class _Client(asyncio.Protocol):
    """One connection with one request in flight at a time."""

    def __init__(self, host: str) -> None:
        self._host = host.encode()
        self._buffer = b""
        self._waiter: asyncio.Future[tuple[int, bytes]] | None = None
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is no subclass

    def connection_lost(self, exc: Exception | None) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(ConnectionError("server closed the connection"))

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        end = self._buffer.find(b"\r\n\r\n")
        if end < 0:
            return
        head = self._buffer[:end]
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.lower() == b"content-length":
                length = int(value)
        if len(self._buffer) < end + 4 + length:
            return
        body = self._buffer[end + 4 : end + 4 + length]
        self._buffer = self._buffer[end + 4 + length :]
        status = int(head[9:12])
        if self._waiter is not None:
            self._waiter.set_result((status, body))

    async def post(self, body: bytes) -> tuple[int, bytes]:
        assert self.transport is not None
        self._waiter = asyncio.get_running_loop().create_future()
        self.transport.write(
            b"POST / HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (self._host, len(body), body)
        )
        return await self._waiter


@dataclass
class Result:
    """What one client process measured inside the timed window."""

    operations: int = 0
    latencies: list[float] = field(default_factory=list)  # seconds per round trip
    errors: int = 0
    cpu: float = 0.0  # CPU seconds this process used in the window


async def _drive(
    host: str,
    port: int,
    connections: int,
    scenario: Scenario,
    prefix: str,
    start_at: float,
    duration: float,
    warmup: int,
) -> Result:
    loop = asyncio.get_running_loop()
    clients: list[_Client] = []
    for _ in range(connections):
        _, client = await loop.create_connection(lambda: _Client(host), host, port)
        clients.append(client)
    result = Result()
    stop_at = start_at + duration

    async def one(client: _Client, name: str, timed: bool) -> None:
        for body in scenario(name):
            sent = time.perf_counter()
            status, reply = await client.post(body)
            if timed and time.time() <= stop_at:
                result.latencies.append(time.perf_counter() - sent)
            if status != 200:
                result.errors += 1
                if result.errors <= 3:
                    print(f"loadgen: status {status}: {reply[:200]!r}", flush=True)

    async def worker(index: int) -> None:
        client = clients[index]
        n = 0
        for _ in range(warmup):
            await one(client, f"{prefix}w{index}.{n}", False)
            n += 1
        await asyncio.sleep(max(0.0, start_at - time.time()))
        if not cpu_at_start:
            cpu_at_start.append(time.process_time())
        while time.time() < stop_at:
            await one(client, f"{prefix}{index}.{n}", True)
            n += 1
            if time.time() <= stop_at:
                result.operations += 1

    cpu_at_start: list[float] = []
    await asyncio.gather(*(worker(i) for i in range(connections)))
    result.cpu = time.process_time() - cpu_at_start[0]
    for client in clients:
        assert client.transport is not None
        client.transport.close()
    return result


def _child(
    out: multiprocessing.Queue,
    args: tuple,
) -> None:
    try:
        import uvloop

        runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
    except ImportError:
        runner = asyncio.Runner()
    with runner:
        try:
            out.put(runner.run(_drive(*args)))
        except BaseException as error:
            out.put(RuntimeError(f"client process failed: {error!r}"))
            raise


@dataclass
class Summary:
    connections: int
    processes: int
    seconds: float
    operations: int
    round_trips: int
    errors: int
    p50_ms: float
    p99_ms: float
    client_cpu: float  # fraction of one core the client processes used, summed
    probed: float  # the change of ``probe`` per second of the window

    @property
    def ops_per_s(self) -> float:
        return self.operations / self.seconds

    @property
    def round_trips_per_s(self) -> float:
        return self.round_trips / self.seconds


def run(
    host: str,
    port: int,
    connections: int,
    scenario: Scenario,
    *,
    processes: int = 1,
    duration: float = 5.0,
    warmup: int = 20,
    tag: str = "",
    probe: Callable[[], float] | None = None,
) -> Summary:
    """Load the server from ``processes`` client processes sharing ``connections``.

    ``probe`` (say, the server's CPU seconds) is read when the timed window opens and when
    it closes; the summary carries the difference per second.
    """
    processes = max(1, min(processes, connections))
    ctx = multiprocessing.get_context("spawn")
    out: multiprocessing.Queue = ctx.Queue()
    # Time for every process to start, connect and warm up before the window opens.
    start_at = time.time() + 1.5 + 0.01 * warmup * max(1, connections // processes) / 10
    children = []
    for p in range(processes):
        share = connections // processes + (1 if p < connections % processes else 0)
        prefix = f"{tag}{os.getpid()}-{time.monotonic_ns()}-{p}-"
        args = (host, port, share, scenario, prefix, start_at, duration, warmup)
        child = ctx.Process(target=_child, args=(out, args), daemon=True)
        child.start()
        children.append(child)
    probed = 0.0
    if probe is not None:
        time.sleep(max(0.0, start_at - time.time()))
        before = probe()
        time.sleep(max(0.0, start_at + duration - time.time()))
        probed = (probe() - before) / duration
    results: list[Result] = [out.get(timeout=duration + 120) for _ in children]
    for child in children:
        child.join()
    for result in results:
        if isinstance(result, Exception):
            raise result
    latencies = sorted(lat for r in results for lat in r.latencies)

    def percentile(q: float) -> float:
        if not latencies:
            return float("nan")
        return 1000 * latencies[min(len(latencies) - 1, int(q * len(latencies)))]

    return Summary(
        connections=connections,
        processes=processes,
        seconds=duration,
        operations=sum(r.operations for r in results),
        round_trips=len(latencies),
        errors=sum(r.errors for r in results),
        p50_ms=percentile(0.50),
        p99_ms=percentile(0.99),
        client_cpu=sum(r.cpu for r in results) / duration,
        probed=probed,
    )
