"""Queues under faults, with real processes: a worker module whose one workflow records the
start and end of its work to an fsync'd ledger, and the checks that read the ledger.

Every line of the ledger is ``start|end ID KEY PID INSTANT`` (``time.monotonic()``, one
clock for every process of the machine). A run that started and has no end was killed; it
held its execution's slot until that execution ran again (a lapsed lease keeps the slot,
docs/queues.md), so it counts as running until the execution's next start.

The worker module is ``tests.support.processes.PRELUDE`` (``TROTH_URL``, ``TTL``,
``LEDGER``) plus the queue of ``QUEUE_SPEC`` (JSON: ``name``, ``concurrency``,
``key_concurrency``, ``rate``: ``[limit, seconds]``), declared as every process that uses a
queue declares it. The execution whose id is ``VICTIM`` hangs on its first run (until it is
killed) and runs as the others on the next.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from tests.support import processes
from troth import Queue, RateLimit, Troth

GROUP = "workers"

WORKER = """
import json
from troth import RateLimit

SPEC = json.loads(os.environ["QUEUE_SPEC"])
RATE = SPEC.get("rate")
app.queue(
    SPEC["name"],
    concurrency=SPEC.get("concurrency"),
    key_concurrency=SPEC.get("key_concurrency"),
    rate=RateLimit(RATE[0], timedelta(seconds=RATE[1])) if RATE else None,
)
VICTIM = os.environ.get("VICTIM")
HUNG = Path(str(LEDGER) + ".hung")


async def hold(id: str, key: str, seconds: float) -> None:
    record(f"start {id} {key} {os.getpid()} {time.monotonic()}")
    if id == VICTIM and not HUNG.exists():
        HUNG.write_text(str(os.getpid()))
        await asyncio.sleep(3600)  # until the test kills this process
    await asyncio.sleep(seconds)
    record(f"end {id} {key} {os.getpid()} {time.monotonic()}")


@app.register
async def work(ctx: Context, key: str, seconds: float) -> str:
    await ctx.run(hold, ctx.id, key, seconds)
    return key
"""


@dataclass(frozen=True)
class Spec:
    name: str
    concurrency: int | None = None
    key_concurrency: int | None = None
    rate: tuple[int, float] | None = None  # (limit, seconds)

    def env(self) -> str:
        return json.dumps(
            {
                "name": self.name,
                "concurrency": self.concurrency,
                "key_concurrency": self.key_concurrency,
                "rate": self.rate,
            }
        )

    def declare(self, app: Troth) -> Queue:
        rate = RateLimit(self.rate[0], timedelta(seconds=self.rate[1])) if self.rate else None
        return app.queue(
            self.name,
            concurrency=self.concurrency,
            key_concurrency=self.key_concurrency,
            rate=rate,
        )


def write_worker(directory: Path) -> str:
    """The worker module in ``directory``; its name for ``troth worker``."""
    processes.write_module(directory, "queued", WORKER)
    return "queued:app"


def worker_env(spec: Spec, ledger: Path, urls: Iterable[str], ttl: float, **extra: str) -> dict:
    return {
        "TROTH_URL": ",".join(urls),
        "TROTH_GROUP": GROUP,
        "TTL": str(ttl),
        "LEDGER": str(ledger),
        "QUEUE_SPEC": spec.env(),
        **extra,
    }


@dataclass
class Run:
    id: str
    key: str
    pid: int
    start: float
    end: float | None  # None: killed while it ran


def runs(ledger: Path) -> list[Run]:
    """Every run the ledger records, in the order they started."""
    done: list[Run] = []
    open_runs: dict[tuple[str, int], Run] = {}
    for line in ledger.read_text().splitlines():
        what, id, key, pid, at = line.split()
        if what == "start":
            open_runs[(id, int(pid))] = run = Run(id, key, int(pid), float(at), None)
            done.append(run)
        else:
            open_runs.pop((id, int(pid))).end = float(at)
    return sorted(done, key=lambda run: run.start)


def held(all_runs: list[Run], until: float) -> list[tuple[str, str, float, float]]:
    """(id, key, from, to) of each slot held: a killed run holds its execution's slot until
    the execution's next run starts (or ``until``)."""
    spans = []
    for n, run in enumerate(all_runs):
        end = run.end
        if end is None:
            later = [r.start for r in all_runs[n + 1 :] if r.id == run.id]
            end = later[0] if later else until
        spans.append((run.id, run.key, run.start, end))
    return spans


def most_at_once(spans: list[tuple[str, str, float, float]], key: str | None = None) -> int:
    """The most distinct executions (of ``key``, or of any) holding a slot at one instant.
    Two runs of one execution at once (a lease lapsed while its worker still ran) share the
    execution's one slot."""
    chosen = [s for s in spans if key is None or s[1] == key]
    most = 0
    for _, _, at, _ in chosen:
        most = max(most, len({id for id, _, start, end in chosen if start <= at < end}))
    return most


def most_starts_in(all_runs: list[Run], window: float) -> int:
    """The most first starts of executions (admissions) within any ``window`` seconds."""
    firsts = sorted({run.id: run.start for run in reversed(all_runs)}.values())
    return max(
        (sum(1 for t in firsts[i:] if t - at < window) for i, at in enumerate(firsts)), default=0
    )


def queue_counts(status_and_body: tuple[int, Any]) -> tuple[int, int]:
    """(running, waiting) of a ``queue.get`` answer."""
    status, body = status_and_body
    assert status == 200, body
    return body["queue"]["running"], body["queue"]["waiting"]


async def run_queued(
    urls: list[str], spec: Spec, jobs: list[tuple[str, str, float]], deadline: float = 60
) -> dict[str, str]:
    """Start ``(id, key, seconds)`` jobs in the queue for the workers; their results."""
    client = Troth(url=urls, group="clients")
    queue = spec.declare(client)  # declared when the client starts, before any is put in it
    async with client:
        handles = {
            id: queue.options(key=key, target=GROUP).rpc(id, "work", key, seconds)
            for id, key, seconds in jobs
        }
        async with asyncio.timeout(deadline):
            return {id: await handle.result() for id, handle in handles.items()}


def wait_serving(logs: Iterable[Path], within: float = 30) -> None:
    """Wait until every worker whose log is in ``logs`` has its poll stream open.

    A rate counts admissions, and an execution is admitted when its execute is sent, not
    when a worker runs it (docs/queues.md): executes sent before any worker listens wait in
    the outbox and then run together, so a test that reads the rate from the runs starts
    its executions once the workers listen."""
    deadline = time.monotonic() + within
    for log in logs:
        while "serving work for group" not in (log.read_text() if log.exists() else ""):
            assert time.monotonic() < deadline, f"{log.name}: the worker never started"
            time.sleep(0.02)
    time.sleep(0.5)  # the poll stream opens just after that line (about 0.1 s)
