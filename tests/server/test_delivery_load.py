"""Delivery under load, against a real ``troth serve``: failing push targets do not snowball,
an idle server with undeliverable work sleeps, and a backlog reaches a worker at network speed.

Figures are read from the server process itself: CPU from ``/proc/<pid>/stat`` (utime +
stime), memory from ``/proc/<pid>/status`` (VmRSS), and live asyncio tasks from the
summary line the delivery loop logs every few seconds while pushes fail.
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.support.ports import free_port
from tests.support.processes import rss_mb
from tests.support.servers import FAR, TrothServer
from tests.support.sse import SseClient
from tests.support.waiting import eventually

# Slow: load on a troth serve process (backlogs, push storms, idle loops), seconds each.
pytestmark = pytest.mark.slow

_TICKS = os.sysconf("SC_CLK_TCK")

# An HTTP/1.1 server answering 503 to every request, with keep-alive, in a process of its
# own so its work does not compete with the test's measurements.
_FAILING_TARGET = r"""
import asyncio, sys

async def answer(reader, writer):
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            await reader.readexactly(length)
            writer.write(b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n")
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()

async def main():
    server = await asyncio.start_server(answer, "127.0.0.1", int(sys.argv[1]), backlog=1024)
    print("ready", flush=True)
    await server.serve_forever()

asyncio.run(main())
"""


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime


def live_tasks(server: TrothServer) -> int | None:
    """The latest count of live asyncio tasks the server logged, if any."""
    counts = re.findall(r"asyncio tasks: (\d+)", server.output())
    return int(counts[-1]) if counts else None


@pytest.fixture
def failing_target() -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-c", _FAILING_TARGET, str(port)], stdout=subprocess.PIPE
    )
    try:
        assert process.stdout is not None and process.stdout.readline() == b"ready\n"
        yield f"http://127.0.0.1:{port}"
    finally:
        process.kill()
        process.wait(10)


def create_all(server: TrothServer, ids: list[str], tags: Callable[[str], dict[str, str]]) -> None:
    """Create a promise for each id, several at a time."""

    def create(chunk: list[str]) -> None:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            for id in chunk:
                body = server.envelope(
                    "promise.create", {"id": id, "timeoutAt": FAR, "tags": tags(id)}
                )
                assert http.post("/", json=body).status_code == 200

    chunks = [ids[i::8] for i in range(8)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(create, chunks))


def get_latency_ms(server: TrothServer, id: str) -> float:
    started = time.perf_counter()
    response = server.send("promise.get", {"id": id})
    elapsed = (time.perf_counter() - started) * 1000
    assert response.status_code == 200
    return elapsed


# -- failing push targets ---------------------------------------------------------------------


def failure_storm(
    start_server: Callable[..., TrothServer], target: str, targets: int, seconds: float
) -> None:
    """``targets`` tasks, each pushed to a target path of its own that answers 503, for
    ``seconds``; the tasks' executes are re-sent every 5 s (the default retry timeout)."""
    server = start_server("--push-timeout", "2000", "--shutdown-timeout", "10000")
    assert server.process is not None
    pid = server.process.pid
    server.create_promise("probe")
    ids = [f"t{i}" for i in range(targets)]
    create_all(server, ids, lambda id: {"resonate:target": f"{target}/{id}"})

    started = time.monotonic()
    warm = seconds / 3
    latencies: list[float] = []
    rss_warm = cpu_warm = 0.0
    peak_tasks = 0
    while (elapsed := time.monotonic() - started) < seconds:
        latencies.append(get_latency_ms(server, "probe"))
        if rss_warm == 0 and elapsed >= warm:
            rss_warm, cpu_warm, warm_at = rss_mb(pid), cpu_seconds(pid), time.monotonic()
        peak_tasks = max(peak_tasks, live_tasks(server) or 0)
        time.sleep(0.05)
    rss_end, cpu_end = rss_mb(pid), cpu_seconds(pid)
    cpu_share = (cpu_end - cpu_warm) / (time.monotonic() - warm_at)

    # The messages are all still there: nothing was acknowledged without a 2xx.
    assert len(server.snap()["messages"]) == targets

    sigterm = time.monotonic()
    assert server.terminate(timeout=30) == 0
    shutdown = time.monotonic() - sigterm

    p50 = statistics.median(latencies)
    figures = (
        f"{targets} targets for {seconds:.0f}s: promise.get p50 {p50:.2f} ms over "
        f"{len(latencies)} requests; RSS {rss_warm:.1f} -> {rss_end:.1f} MB after warm-up; "
        f"CPU {cpu_share:.0%} after warm-up; peak asyncio tasks {peak_tasks}; "
        f"SIGTERM -> exit {shutdown:.2f}s"
    )
    print(figures)
    # Measured 1.6-1.7 ms alone, but a 2-core CI box busy with 2,000 failing pushes every
    # 5 s went past 3 ms: the figure is printed, and only a snowball (requests waiting
    # behind the push storm, tens of milliseconds) fails here.
    assert p50 < 20.0, figures
    # Flat memory: less than 16 MB grown after warm-up (the unbounded build-up grew ~1 MB/s).
    assert rss_end - rss_warm < 16, figures
    # Live tasks: the loops, the server's own, and at most push_concurrency (256) pushes.
    assert 0 < peak_tasks < 256 + 64, figures
    assert shutdown < 10, figures


def test_failing_push_targets_do_not_snowball(
    start_server: Callable[..., TrothServer], failing_target: str
) -> None:
    failure_storm(start_server, failing_target, targets=500, seconds=20)


def test_two_thousand_failing_push_targets_for_two_minutes(
    start_server: Callable[..., TrothServer], failing_target: str
) -> None:
    failure_storm(start_server, failing_target, targets=2000, seconds=120)


# -- idle ---------------------------------------------------------------------------------------


def idle_with_undeliverable_tasks(server: TrothServer) -> None:
    assert server.process is not None
    pid = server.process.pid
    ids = [f"t{i}" for i in range(20_000)]
    create_all(server, ids, lambda id: {"resonate:target": "poll://any@nobody"})
    assert server.ok("promise.get", {"id": "t19999"})["promise"]["state"] == "pending"
    time.sleep(3)  # let the writes settle

    before, at = cpu_seconds(pid), time.monotonic()
    time.sleep(10)
    share = (cpu_seconds(pid) - before) / (time.monotonic() - at)
    print(f"idle with 20,000 undeliverable tasks: {share:.2%} CPU over 10 s")
    assert share < 0.02, f"{share:.2%} CPU"


# Tasks are re-offered every --tasks-retry-timeout: at the default 5 s, 20,000 tasks are 4,000
# transitions a second, which is work, not idleness. An hour isolates what delivery does.
_IDLE_FLAGS = ("--tasks-retry-timeout", "3600000")


def test_an_idle_server_with_undeliverable_tasks_sleeps(
    start_server: Callable[..., TrothServer],
) -> None:
    idle_with_undeliverable_tasks(start_server(*_IDLE_FLAGS))


@pytest.mark.pg
def test_an_idle_postgres_server_with_undeliverable_tasks_sleeps(
    start_server: Callable[..., TrothServer],
) -> None:
    from tests.support.postgres import cluster_url, fresh_database

    with fresh_database(cluster_url(), "troth_idle") as url:
        server = start_server(*_IDLE_FLAGS, "--db", url)
        try:
            idle_with_undeliverable_tasks(server)
        finally:
            server.kill()


# -- backlog ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("work", "floor"), [(0.0, 5000), (0.0005, 1000)], ids=["fast-reader", "half-ms-per-message"]
)
def test_a_backlog_reaches_a_worker_at_network_speed(
    start_server: Callable[..., TrothServer], work: float, floor: int
) -> None:
    """The pace is the worker's, not one the server sets: a raw reader gets the backlog at
    tens of thousands a second (measured 29,000/s; 700-1,100/s before), and one that spends
    half a millisecond on each message at nearly its own pace of under 1,800/s (measured
    1,680/s; 576/s before)."""
    server = start_server()
    ids = [f"t{i}" for i in range(2000)]
    create_all(server, ids, lambda id: {"resonate:target": "poll://any@backlog"})
    eventually(lambda: len(server.snap()["messages"]) == 2000)

    client = SseClient(server.port, "backlog", "w1")
    try:
        started = time.monotonic()
        seen = set()
        for _ in ids:
            seen.add(client.message(timeout=10)["data"]["task"]["id"])
            if work:
                time.sleep(work)
        took = time.monotonic() - started
    finally:
        client.close()
    rate = len(ids) / took
    print(f"backlog of 2,000 to one SSE worker ({work * 1000:.1f} ms each): {rate:.0f} messages/s")
    assert seen == set(ids)
    assert rate >= floor, f"{rate:.0f} messages/s"
    # Every one acknowledged: acks trail the stream, and a loaded CI box took over 5 s.
    eventually(lambda: server.snap()["messages"] == [], timeout=60)
