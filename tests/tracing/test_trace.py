"""One trace from the caller through the server to the workers and back, across a crash.

A caller (this process, spans in OpenTelemetry's in-memory exporter) starts a workflow on
a group of two worker processes behind a real ``troth serve``; the server and the workers
record their spans to files (``spans.py``). The worker running the workflow is killed with
SIGKILL in the middle of a step, and the other one resumes it. Every span of the workflow,
in all four processes, must be one trace whose every parent is in it.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.support import processes
from tests.support.servers import serve
from tests.support.waiting import eventually
from tests.tracing import spans
from troth import Troth
from troth.sdk.recording import START_AFTER

pytestmark = pytest.mark.slow

WORKFLOW = """
def first(n: int) -> int:
    record(f"first {os.getpid()}")
    return n + 1


def slow(n: int) -> int:
    # The first attempt hangs until the test kills its worker; the next one finishes.
    marker = Path(os.environ["MARKER"])
    if not marker.exists():
        marker.write_text(str(os.getpid()))
        time.sleep(600)
    return n * 10


@app.register
async def child(ctx: Context, n: int) -> int:
    return await ctx.run(first, n)


@app.register
async def order(ctx: Context, n: int) -> int:
    a = await ctx.run(first, n)
    b = await ctx.rpc(child, a)
    return await ctx.run(slow, b)
"""


def test_one_trace_follows_a_workflow_through_server_and_workers_across_a_kill(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "spans"
    folder.mkdir()
    processes.write_module(tmp_path, "shop", WORKFLOW)
    marker = tmp_path / "marker"
    with serve("sqlite", tmp_path, env=spans.traced_env(folder, "server")) as server:
        env = {
            "TROTH_URL": server.url, "TROTH_GROUP": "workers", "TTL": "1.5",
            "LEDGER": str(tmp_path / "ledger"), "MARKER": str(marker),
        }  # fmt: skip
        workers = [
            processes.worker(
                tmp_path, {**env, **spans.traced_env(folder, role)}, "shop", tmp_path / role
            )
            for role in ("worker1", "worker2")
        ]
        try:
            caller_spans, result = asyncio.run(call(server.url, marker))
        finally:
            for worker in workers:
                worker.kill()
                worker.wait()
    assert result == 30

    killed = int(marker.read_text())
    caller = [{"role": "caller", "pid": os.getpid(), **spans.as_dict(s)} for s in caller_spans]
    everything = caller + spans.read(folder)
    (root,) = [s for s in caller if s["name"] == "rpc order"]
    trace = [s for s in everything if s["trace"] == root["trace"]]

    # One connected trace: the caller's rpc is its only root, every other parent is in it.
    ids = {s["span"] for s in trace}
    assert [s for s in trace if s["parent"] not in ids] == [root]
    roles = Counter(s["role"] for s in trace)
    assert roles["caller"] and roles["server"], roles
    assert {s["pid"] for s in trace if s["role"].startswith("worker")} == {w.pid for w in workers}

    # The server's create of the root joined the caller's span.
    (create,) = [s for s in trace if s["name"] == "promise.create" and s["role"] == "server"]
    assert create["parent"] == root["span"]
    assert create["attributes"]["troth.id"] == "order-1"
    assert create["attributes"]["troth.status"] == 200

    # The requests a run makes (its steps' creates and settles) join the trace through
    # their HTTP headers; the rest have spans of their own.
    run_ids = {s["span"] for s in trace if s["name"] == "execute order"}
    fences = [s for s in trace if s["role"] == "server" and s["name"] == "task.fence"]
    batches = [s for s in trace if s["role"] == "server" and s["name"] == "task.fences"]
    # 2 steps: a create and a settle each, fenced one by one or together in a task.fences
    # (whose span counts its fences).
    fenced = len([s for s in fences if s["parent"] in run_ids]) + sum(
        s["attributes"]["troth.batch_size"] for s in batches if s["parent"] in run_ids
    )
    assert fenced >= 4
    # Requests outside the trace have spans too: a suspend says how many callbacks it made.
    suspends = [s for s in everything if s["role"] == "server" and s["name"] == "task.suspend"]
    assert suspends and all(s["attributes"]["troth.batch_size"] >= 1 for s in suspends)
    assert {s["attributes"]["troth.id"] for s in suspends} >= {"order-1"}

    # Each run of the workflow is a child of the caller's rpc: the killed worker's (the
    # last one cut by the kill, never ended) and the resumed one's.
    runs = [s for s in trace if s["name"] == "execute order"]
    assert all(s["parent"] == root["span"] for s in runs)
    assert {s["pid"] for s in runs} == {w.pid for w in workers}
    assert [s["pid"] for s in runs if s["event"] == "start"] == [killed]

    # The step the kill cut short: started there, finished by the other worker's attempt 2.
    slow = [s for s in trace if s["name"] == "step run:slow"]
    assert {(s["pid"] == killed, s["event"], s["attributes"]["troth.attempt"]) for s in slow} == {
        (True, "start", 1),
        (False, "end", 2),
    }

    # The resumed run replays the first step: marked on the run, not run again (each step
    # of the workflow and of its child has one span, on whichever worker ran it).
    first = [s for s in trace if s["name"] == "step run:first"]
    resumed = [s for s in runs if s["pid"] != killed]
    replayed = [e for s in resumed for e in s["events"] if e["name"] == "troth.replayed"]
    assert "run:first" in {e["troth.step"] for e in replayed}
    assert sorted(s["attributes"]["troth.id"] for s in first) == ["order-1:0", "order-1:1.0"]
    assert sum(processes.ledger(tmp_path / "ledger").values()) == 2  # nothing ran twice

    # The child ran under the span of the rpc that created it, with its own step; a later
    # run's rpc met the child's promise at the server, and says so.
    rpcs = [s for s in trace if s["name"] == "rpc child"]
    (rpc,) = [s for s in rpcs if "troth.replayed" not in s["attributes"]]
    assert all(s["attributes"]["troth.replayed"] for s in rpcs if s is not rpc)
    (child,) = [s for s in trace if s["name"] == "execute child"]
    assert child["parent"] == rpc["span"]
    assert any(s["parent"] == child["span"] for s in first)


async def call(url: str, marker: Path) -> tuple[Any, int]:
    """Start the workflow from here; kill the worker that runs its slow step; its result."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    caller = Troth(url=url, group="caller", tracer=provider.get_tracer("caller"))
    async with caller:
        handle = caller.options(target="workers").rpc("order-1", "order", 1)
        await asyncio.to_thread(eventually, marker.exists, 30)
        # The marker is written before the step sleeps; a step running past START_AFTER has
        # its start (attempt 1) recorded, so the run resumed elsewhere makes attempt 2.
        await asyncio.sleep(START_AFTER + 0.25)
        os.kill(int(marker.read_text()), signal.SIGKILL)
        result = await asyncio.wait_for(handle.result(), 60)
    return exporter.get_finished_spans(), result
