"""Delivery under load, against a real ``troth serve``: failing push targets do not snowball,
and a backlog reaches a worker whole (an idle server with a backlog: ``test_idle.py``).

What is asserted holds on a loaded 2-core machine: counts (messages kept, tasks alive,
messages delivered and acknowledged) and memory, not latencies or rates; those figures are
``bench/delivery.py``'s, each against a baseline of the same run. Memory is read from
``/proc/<pid>/status`` (VmRSS), and live asyncio tasks from the summary line the delivery
loop logs every few seconds while pushes fail.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator

import pytest

from tests.support import load
from tests.support.load import create_all
from tests.support.processes import rss_mb
from tests.support.servers import TrothServer
from tests.support.sse import SseClient
from tests.support.waiting import eventually

# Slow: load on a troth serve process (backlogs, push storms, idle loops), seconds each.
pytestmark = pytest.mark.slow


def live_tasks(server: TrothServer) -> int | None:
    """The latest count of live asyncio tasks the server logged, if any."""
    counts = re.findall(r"asyncio tasks: (\d+)", server.output())
    return int(counts[-1]) if counts else None


@pytest.fixture
def failing_target() -> Iterator[str]:
    with load.failing_target() as url:
        yield url


# -- failing push targets ---------------------------------------------------------------------


def failure_storm(
    start_server: Callable[..., TrothServer], target: str, targets: int, seconds: float
) -> None:
    """``targets`` tasks, each pushed to a target path of its own that answers 503, for
    ``seconds``; the tasks' executes are re-sent every 5 s (the default retry timeout).
    Requests are answered throughout (each within the client's 10 s timeout; how fast is
    ``bench/delivery.py``'s storm figure)."""
    server = start_server("--push-timeout", "2000", "--shutdown-timeout", "10000")
    assert server.process is not None
    pid = server.process.pid
    server.create_promise("probe")
    ids = [f"t{i}" for i in range(targets)]
    create_all(server, ids, lambda id: {"resonate:target": f"{target}/{id}"})

    started = time.monotonic()
    warm = seconds / 3
    probes = 0
    rss_warm = 0.0
    peak_tasks = 0
    while (elapsed := time.monotonic() - started) < seconds:
        assert server.ok("promise.get", {"id": "probe"})["promise"]["state"] == "pending"
        probes += 1
        if rss_warm == 0 and elapsed >= warm:
            rss_warm = rss_mb(pid)
        peak_tasks = max(peak_tasks, live_tasks(server) or 0)
        time.sleep(0.05)
    rss_end = rss_mb(pid)

    # The messages are all still there: nothing was acknowledged without a 2xx.
    assert len(server.snap()["messages"]) == targets

    sigterm = time.monotonic()
    assert server.terminate(timeout=30) == 0
    shutdown = time.monotonic() - sigterm

    figures = (
        f"{targets} targets for {seconds:.0f}s: {probes} promise.get answered;"
        f" RSS {rss_warm:.1f} -> {rss_end:.1f} MB after warm-up; peak asyncio tasks"
        f" {peak_tasks}; SIGTERM -> exit {shutdown:.2f}s"
    )
    print(figures)
    # Flat memory: less than 16 MB grown after warm-up (the unbounded build-up grew ~1 MB/s).
    assert rss_end - rss_warm < 16, figures
    # Live tasks: the loops, the server's own, and at most push_concurrency (256) pushes.
    assert 0 < peak_tasks < 256 + 64, figures
    # Within the 10 s shutdown timeout, so the in-flight pushes did not hold the exit up to it.
    assert shutdown < 10, figures


def test_failing_push_targets_do_not_snowball(
    start_server: Callable[..., TrothServer], failing_target: str
) -> None:
    failure_storm(start_server, failing_target, targets=500, seconds=20)


def test_two_thousand_failing_push_targets_for_two_minutes(
    start_server: Callable[..., TrothServer], failing_target: str
) -> None:
    failure_storm(start_server, failing_target, targets=2000, seconds=120)


# -- backlog ------------------------------------------------------------------------------------


@pytest.mark.parametrize("work", [0.0, 0.0005], ids=["fast-reader", "half-ms-per-message"])
def test_a_backlog_reaches_a_worker_whole_and_is_acknowledged(
    start_server: Callable[..., TrothServer], work: float
) -> None:
    """2,000 executes waiting in the outbox reach one SSE reader, each once, and all are
    acknowledged, whether the reader takes them as they come or spends half a millisecond
    on each. (The pace, the worker's and not one the server sets, is ``bench/delivery.py``'s
    backlog figure.)"""
    # The raw reader never acquires its tasks: at the default 5 s retry timeout their retries
    # would re-enqueue the executes after it has read them, and with the reader gone nothing
    # would take them out of the outbox again. An hour keeps them from being re-sent.
    server = start_server("--tasks-retry-timeout", "3600000")
    ids = [f"t{i}" for i in range(2000)]
    create_all(server, ids, lambda id: {"resonate:target": "poll://any@backlog"})
    eventually(lambda: len(server.snap()["messages"]) == 2000)

    client = SseClient(server.port, "backlog", "w1")
    try:
        seen = []
        for _ in ids:
            seen.append(client.message(timeout=30)["data"]["task"]["id"])
            if work:
                time.sleep(work)
        client.no_message(1)
    finally:
        client.close()
    assert sorted(seen) == sorted(ids)
    # Every one acknowledged: acks trail the stream, and a loaded CI box took over 5 s.
    eventually(lambda: server.snap()["messages"] == [], timeout=60)
