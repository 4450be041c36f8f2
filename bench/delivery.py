"""Delivery under load, in figures: ``python bench/delivery.py [--quick] [--only PART]``.

The figures of ``tests/server/test_delivery_load.py`` and ``tests/server/test_catch_up.py``
that a shared 2-core machine cannot hold to a fixed number (those tests keep the behaviour:
nothing lost, every message delivered and acknowledged, memory and tasks bounded, the
server answering and stopping), each printed next to a baseline taken in the same run, on
``troth serve`` processes on fresh SQLite files:

- **storm**: ``promise.get`` latency while N tasks (default 500) push to a target that
  answers 503 to everything, each re-sent every 5 s (the default retry timeout), against
  the same server's latency before the tasks exist; the server's CPU share, RSS growth and
  peak asyncio tasks after a warm-up of a third of the window; SIGTERM to exit.
- **backlog**: 2,000 execute messages waiting in the outbox, read by one raw SSE reader
  (``poll://any@backlog``), as fast as it can and spending half a millisecond on each. The
  rate is set against the rate the same server wrote the backlog at, and the half-ms
  reader's against its own pace (2,000 half-ms sleeps alone, timed in this run).
- **catch-up**: ``/health`` latency while the timeouts loop catches up ten million missed
  occurrences of a per-second schedule, against the same server's before it starts; how
  many occurrences it created meanwhile; SIGTERM to exit in the middle of it.

Ratios near 1 mean the load costs the measured path nothing; a snowball (requests queued
behind the pushes, a delivery loop that paces the reader) shows as tens.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the test harness: one way to start and drive troth serve

from tests.support.load import cpu_seconds, create_all, failing_target  # noqa: E402
from tests.support.processes import rss_mb  # noqa: E402
from tests.support.servers import TrothServer, now_ms  # noqa: E402
from tests.support.sse import SseClient  # noqa: E402

BACKLOG = 2000
HALF_MS = 0.0005
MISSED = 10_000_000  # a per-second schedule's occurrences: ~116 days
EVERY_SECOND = {
    "id": "every-second",
    "cron": "* * * * * *",
    "promiseId": "{{.id}}.{{.timestamp}}",
    "promiseTimeout": 1000,
    "promiseTags": {"resonate:target": "poll://any@nobody"},
}


def serve(folder: Path, name: str, *flags: str) -> TrothServer:
    return TrothServer(folder / f"{name}.db", folder / f"{name}.log", (*flags, "--debug")).start()


def sample(seconds: float, once: Callable[[], float], every: float = 0.05) -> list[float]:
    """``once()``'s figures (ms), every ``every`` s for ``seconds``."""
    figures = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        figures.append(once())
        time.sleep(every)
    return figures


def timed(request: Callable[[], httpx.Response]) -> Callable[[], float]:
    """A sampler of ``request``'s round trip, in ms; it must answer 200."""

    def once() -> float:
        started = time.perf_counter()
        assert request().status_code == 200
        return (time.perf_counter() - started) * 1000

    return once


def quantiles(ms: list[float]) -> str:
    ms = sorted(ms)
    return f"p50 {statistics.median(ms):.2f} ms, p99 {ms[len(ms) * 99 // 100]:.2f} ms (n={len(ms)})"


def ratios(after: list[float], before: list[float]) -> str:
    """``after``'s p50 and p99 over ``before``'s."""
    a, b = sorted(after), sorted(before)
    return (
        f"p50 {statistics.median(a) / statistics.median(b):.2f}×,"
        f" p99 {a[len(a) * 99 // 100] / b[len(b) * 99 // 100]:.2f}×"
    )


def storm(folder: Path, targets: int, seconds: float) -> None:
    print(f"\n## storm: {targets} tasks pushing to a target that answers 503, {seconds:.0f} s")
    with failing_target() as target:
        server = serve(folder, "storm", "--push-timeout", "2000", "--shutdown-timeout", "10000")
        try:
            assert server.process is not None
            pid = server.process.pid
            server.create_promise("probe")
            get = timed(lambda: server.send("promise.get", {"id": "probe"}))
            quiet = sample(seconds / 3, get)
            create_all(
                server, [f"t{i}" for i in range(targets)],
                lambda id: {"resonate:target": f"{target}/{id}"},
            )  # fmt: skip
            during = sample(seconds / 3, get)  # the warm-up
            rss_warm, cpu_warm, warm_at = rss_mb(pid), cpu_seconds(pid), time.monotonic()
            during += sample(seconds * 2 / 3, get)
            share = (cpu_seconds(pid) - cpu_warm) / (time.monotonic() - warm_at)
            rss_end = rss_mb(pid)
            counts = re.findall(r"asyncio tasks: (\d+)", server.output())
            peak = max(map(int, counts), default=0)
            sigterm = time.monotonic()
            code = server.terminate(timeout=30)
            shutdown = time.monotonic() - sigterm
        finally:
            server.close()
    print(f"promise.get before the tasks: {quantiles(quiet)}")
    print(f"promise.get during the storm: {quantiles(during)}")
    print(f"storm ÷ before: {ratios(during, quiet)}")
    print(
        f"after warm-up: server CPU {share:.0%} of a core, RSS {rss_warm:.1f} -> {rss_end:.1f} MB;"
        f" peak asyncio tasks {peak}; SIGTERM -> exit {code} in {shutdown:.2f} s"
    )


def own_pace(work: float) -> float:
    """Messages a second of a reader that only sleeps ``work`` per message."""
    started = time.monotonic()
    for _ in range(BACKLOG):
        time.sleep(work)
    return BACKLOG / (time.monotonic() - started)


def backlog(folder: Path, work: float) -> None:
    # The reader never acquires the tasks: an hour's retry timeout keeps their executes from
    # being re-sent while it reads (the rate would count them twice).
    server = serve(folder, f"backlog-{work}", "--tasks-retry-timeout", "3600000")
    try:
        ids = [f"t{i}" for i in range(BACKLOG)]
        started = time.monotonic()
        create_all(server, ids, lambda id: {"resonate:target": "poll://any@backlog"})
        written = BACKLOG / (time.monotonic() - started)
        while len(server.snap()["messages"]) < BACKLOG:
            time.sleep(0.1)
        client = SseClient(server.port, "backlog", "w1")
        try:
            started = time.monotonic()
            seen = set()
            for _ in ids:
                seen.add(client.message(timeout=30)["data"]["task"]["id"])
                if work:
                    time.sleep(work)
            rate = BACKLOG / (time.monotonic() - started)
        finally:
            client.close()
        assert seen == set(ids)
    finally:
        server.close()
    line = (
        f"reader spending {work * 1000:.1f} ms a message: {rate:,.0f} messages/s;"
        f" ÷ the server's write rate ({written:,.0f} promises/s): {rate / written:.2f}×"
    )
    if work:
        pace = own_pace(work)
        line += f"; ÷ its own pace ({pace:,.0f}/s alone): {rate / pace:.2f}×"
    print(line)


def last_run_at(server: TrothServer) -> int:
    return server.ok("schedule.get", {"id": "every-second"})["schedule"].get("lastRunAt", 0)


def catch_up(folder: Path, seconds: float) -> None:
    print(f"\n## catch-up: {MISSED:,} missed occurrences of a per-second schedule")
    server = serve(folder, "catch-up", "--shutdown-timeout", "3000")
    try:
        health = timed(lambda: server.http.get("/health"))
        quiet = sample(seconds, health, every=0.02)
        server.ok("debug.start")
        created_at = now_ms() - MISSED * 1000
        server.ok("schedule.create", EVERY_SECOND, **{"resonate:debug_time": created_at})
        server.ok("debug.stop")  # the wall-clock loop resumes and owes the occurrences
        while (began := last_run_at(server)) == 0:
            time.sleep(0.05)
        during = sample(seconds, health, every=0.02)
        reached = last_run_at(server)
        sigterm = time.monotonic()
        code = server.terminate(timeout=30)
        shutdown = time.monotonic() - sigterm
    finally:
        server.close()
    print(f"/health before the catch-up: {quantiles(quiet)}")
    print(f"/health during the catch-up: {quantiles(during)}; over 100 ms:"
          f" {sum(ms >= 100 for ms in during)}")  # fmt: skip
    print(
        f"during ÷ before: {ratios(during, quiet)};"
        f" {(reached - began) // 1000:,} occurrences created meanwhile;"
        f" SIGTERM -> exit {code} in {shutdown:.2f} s (shutdown timeout 3 s)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="shorter windows (storm 9 s)")
    parser.add_argument("--targets", type=int, default=500, help="the storm's failing tasks")
    parser.add_argument("--only", choices=["storm", "backlog", "catch-up"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="troth-bench-delivery-") as tmp:
        folder = Path(tmp)
        if args.only in (None, "storm"):
            storm(folder, args.targets, 9 if args.quick else 30)
        if args.only in (None, "backlog"):
            print(f"\n## backlog: {BACKLOG:,} executes in the outbox, one raw SSE reader")
            for work in (0.0, HALF_MS):
                backlog(folder, work)
        if args.only in (None, "catch-up"):
            catch_up(folder, 2 if args.quick else 5)


if __name__ == "__main__":
    main()
