"""Graceful stop: SIGTERM lets the running step finish and record its result, then hands
the task back, so another worker resumes it at once and nothing finished runs again."""

from __future__ import annotations

import asyncio
import signal
import time
import uuid

import pytest

from tests.support.processes import ledger, wait_for, worker, write_module
from troth.sdk import Troth

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # slow: worker processes, killed or stopped

APP = """
def slow_step(n: int) -> int:
    record(f"start {n}")
    time.sleep(1.5)
    record(f"done {n}")
    return n

@app.register
async def job(ctx: Context) -> int:
    total = 0
    for n in range(3):
        total += await ctx.run(slow_step, n)
    return total
"""


async def test_sigterm_finishes_the_running_step_and_hands_the_task_over(mode_env, tmp_path):
    write_module(tmp_path, "jobs", APP)
    env = {**mode_env, "LEDGER": str(tmp_path / "ledger")}  # the default 30 s lease
    first = worker(tmp_path, env, "jobs:app")
    client = Troth(
        url=mode_env.get("TROTH_URL"), group="clients", db=mode_env.get("TROTH_DB")
    )  # only calls: never started
    try:
        id = f"job-{uuid.uuid4().hex[:6]}"
        handle = client.options(target=mode_env.get("TROTH_GROUP", "default")).rpc(id, "job")
        await handle.started()
        wait_for(tmp_path / "ledger", "start 1")
        first.send_signal(signal.SIGTERM)
        output = first.communicate(timeout=15)[0].decode()
        assert first.returncode == 0, output
        # The step that was running when the signal came finished and was recorded.
        assert ledger(tmp_path / "ledger") == {"start 0": 1, "done 0": 1, "start 1": 1,
                                               "done 1": 1}  # fmt: skip

        stopped = time.monotonic()
        second = worker(tmp_path, env, "jobs:app")
        try:
            assert await asyncio.wait_for(handle.result(), 20) == 0 + 1 + 2
            # Released, not left to its 30 s lease: the second worker took over at once
            # (its start-up alone takes seconds on a loaded machine).
            assert time.monotonic() - stopped < 20
        finally:
            second.send_signal(signal.SIGTERM)
            second.communicate(timeout=15)
    finally:
        if first.poll() is None:
            first.kill()
        await client.stop()
    steps = ledger(tmp_path / "ledger")
    assert all(steps[f"start {n}"] == 1 and steps[f"done {n}"] == 1 for n in range(3)), steps


FLAKY = """
@app.register(retry=Constant(60.0, max_attempts=3))
async def flaky(ctx: Context) -> int:
    record("attempt")
    raise RuntimeError("not yet")
"""


async def test_a_worker_stopped_while_waiting_out_a_recorded_retry_hands_the_task_back(
    mode_env, tmp_path
):
    # The second worker resumes the task inside the retry wait the first one recorded; a
    # SIGTERM there must release the task, not leave it held until its lease lapses.
    write_module(tmp_path, "flaky", FLAKY)
    env = {**mode_env, "LEDGER": str(tmp_path / "ledger")}  # the default 30 s lease
    client = Troth(url=mode_env.get("TROTH_URL"), group="clients", db=mode_env.get("TROTH_DB"))
    workers = []
    try:
        id = f"flaky-{uuid.uuid4().hex[:6]}"
        handle = client.options(target=mode_env.get("TROTH_GROUP", "default")).rpc(id, "flaky")
        for _ in range(2):
            workers.append(worker(tmp_path, env, "flaky:app"))
            deadline = time.monotonic() + 20
            while await handle.status() != "running":
                assert time.monotonic() < deadline, "no worker took the task"
                await asyncio.sleep(0.05)
            workers[-1].send_signal(signal.SIGTERM)
            output = workers[-1].communicate(timeout=15)[0].decode()
            assert workers[-1].returncode == 0, output
            # Handed back: pending again at once, not running until the lease lapses.
            assert await handle.status() == "pending", output
        assert ledger(tmp_path / "ledger") == {"attempt": 1}
    finally:
        for process in workers:
            if process.poll() is None:
                process.kill()
        await client.stop()
