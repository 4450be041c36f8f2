"""A step that blocks the event loop past its lease (issue 24), with real ``troth worker``
processes against ``troth serve``, and embedded.

- An ``async def`` step calling ``time.sleep`` longer than the lease used to lose the lease
  (heartbeats ran on the blocked loop), be fenced out and run again, for ever. Heartbeats
  now come from a thread of their own: it runs once, the execution finishes, and the stall
  is an ERROR line naming the execution, the step and how long the loop was blocked.
- A step that holds the GIL (``ctypes.PyDLL`` calls do not release it) stops the heartbeat
  thread too, so its lease does lapse: each lost attempt is recorded with its cause, and
  after ``max_lease_losses`` in a row the task halts with a reason naming the step and the
  cause, instead of running the step for ever.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.support.processes import ledger, worker, write_module
from troth.sdk import Context, HaltedError, Troth

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # worker processes, seconds of blocking

APP = """
import ctypes

_libc = ctypes.PyDLL(None)  # a PyDLL call keeps the GIL: no thread of the process runs

@app.register
async def blocking(seconds: float) -> str:
    record("blocking")
    time.sleep(seconds)  # the classic mistake: a blocking client inside an async def
    return "slept"

@app.register
async def gil_holding(seconds: int) -> str:
    record("gil")
    _libc.sleep(seconds)
    return "held"

@app.register
async def sleeper(ctx: Context) -> str:
    return await ctx.run(blocking, 3.0)

@app.register
async def holder(ctx: Context) -> str:
    return await ctx.run(gil_holding, 3)
"""


def stop(process: subprocess.Popen[bytes]) -> str:
    process.send_signal(signal.SIGTERM)
    try:
        return process.communicate(timeout=20)[0].decode()
    except subprocess.TimeoutExpired:
        process.kill()
        return process.communicate()[0].decode()


async def test_an_async_step_that_sleeps_past_the_lease_runs_once_and_is_reported(
    server, tmp_path: Path
) -> None:
    group = f"b{uuid.uuid4().hex[:6]}"
    write_module(tmp_path, "blockapp", APP)
    env = {"TROTH_URL": server.url, "TROTH_GROUP": group, "TTL": "2",
           "LEDGER": str(tmp_path / "ledger")}  # fmt: skip
    process = worker(tmp_path, env, "blockapp:app")
    output = ""
    try:
        client = Troth(url=server.url, group="clients")
        handle = client.options(target=group).rpc(f"sleeper-{group}", "sleeper")
        assert await asyncio.wait_for(handle.result(), 60) == "slept"
        await client.stop()
    finally:
        output = stop(process)
    assert ledger(tmp_path / "ledger")["blocking"] == 1, output
    assert "no longer held" not in output, output
    stall = [line for line in output.splitlines() if "blocked the event loop" in line]
    assert stall, output
    assert "ERROR" in stall[0] and f"sleeper-{group}" in stall[0], stall
    assert "blocking" in stall[0] and "3.0 s" in stall[0], stall
    # The step's record keeps the stall: troth tree shows it as a warning on that step.
    tree = subprocess.run(
        [sys.executable, "-m", "troth", "tree", f"sleeper-{group}", "--url", server.url],
        capture_output=True, text=True, timeout=30, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert tree.returncode == 0, tree.stderr
    lines = tree.stdout.splitlines()
    step = next(i for i, line in enumerate(lines) if f"sleeper-{group}:0" in line)
    assert "blocked the event loop for 3.0 s" in "\n".join(lines[step : step + 3]), tree.stdout
    assert sum("blocked the event loop" in line for line in lines) == 1, tree.stdout


async def test_an_embedded_async_step_that_sleeps_past_the_lease_runs_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from datetime import timedelta

    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry()
    app = Troth(db=str(tmp_path / "troth.db"), ttl=timedelta(seconds=1), metrics=registry)
    runs: list[int] = []

    @app.register
    async def blocking() -> str:
        runs.append(1)
        import time

        time.sleep(1.5)
        return "slept"

    @app.register
    async def sleeper(ctx: Context) -> str:
        return await ctx.run(blocking)

    async with app:
        assert await asyncio.wait_for(app.run("embedded-sleeper", sleeper).result(), 30) == (
            "slept"
        )
    assert runs == [1]
    labels = {"function": "blocking"}
    assert registry.get_sample_value("troth_sdk_loop_stalls_total", labels) == 1
    assert (registry.get_sample_value("troth_sdk_loop_stalled_seconds_total", labels) or 0) > 1.4
    assert any(
        "blocked the event loop" in r.getMessage() and r.levelname == "ERROR"
        for r in caplog.records
    ), [r.getMessage() for r in caplog.records]


async def test_a_step_whose_lease_lapses_again_and_again_halts_with_the_cause(
    server, tmp_path: Path
) -> None:
    group = f"h{uuid.uuid4().hex[:6]}"
    write_module(tmp_path, "holdapp", APP)
    env = {"TROTH_URL": server.url, "TROTH_GROUP": group, "TTL": "1",
           "LEDGER": str(tmp_path / "ledger")}  # fmt: skip
    process = worker(tmp_path, env, "holdapp:app")
    output = ""
    try:
        client = Troth(url=server.url, group="clients")
        handle = client.options(target=group).rpc(f"holder-{group}", "holder")
        with pytest.raises(HaltedError) as halted:
            await asyncio.wait_for(handle.result(), 90)
        await client.stop()
    finally:
        output = stop(process)
    runs = ledger(tmp_path / "ledger")["gil"]
    assert 1 <= runs <= 3, (runs, output)
    reason = halted.value.reason or ""
    assert "gil_holding" in reason or f"holder-{group}" in reason, reason
    assert "lost its lease 3 times" in reason, reason
    assert "blocked the event loop" in reason, reason
