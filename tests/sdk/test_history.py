"""Determinism and versioning: a replay must meet the history it recorded.

Each scenario starts an execution with one app, stops that app while the execution waits
on an external promise, and resumes it with another app (same database) whose code has
changed: the way a redeploy meets executions in flight.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from troth.protocol.records import TaskState
from troth.protocol.requests import TaskContinueRequest, TaskGetRequest
from troth.sdk import Context
from troth.testing import VirtualTroth

pytestmark = pytest.mark.anyio


def step_a() -> str:
    return "a"


def step_b() -> str:
    return "b"


async def task_state(app: VirtualTroth, id: str) -> TaskState:
    status, body = await app.runtime.network.send("task.get", TaskGetRequest(id))
    assert status == 200
    return body.task.state


async def start_and_park(db: Path, flow, id: str, version: int = 1) -> str:
    """Run ``flow`` until it waits on its external promise; answer that promise's id."""
    app = VirtualTroth(db=str(db))
    app.register(flow, name="flow", version=version)
    async with app:
        app.run(id, "flow")
        while True:
            await app.settle()
            for candidate in (f"{id}:1", f"{id}:0"):
                try:
                    promise = await app.promises.get(candidate)
                except Exception:
                    continue
                if promise.tags.get("troth:step") == "promise":
                    return promise.id
            await asyncio.sleep(0.01)


async def original(ctx: Context) -> str:
    first = await ctx.run(step_a)
    answer = await ctx.promise()
    return f"{first}:{answer}"


async def reordered(ctx: Context) -> str:
    first = await ctx.run(step_b)  # the deploy changed what the first step runs
    answer = await ctx.promise()
    return f"{first}:{answer}"


async def test_a_replay_that_calls_a_different_step_halts_the_task(tmp_path, caplog):
    db = tmp_path / "t.db"
    approval = await start_and_park(db, original, "nd")

    changed = VirtualTroth(db=str(db))
    changed.register(reordered, name="flow")
    with caplog.at_level(logging.ERROR, logger="troth.sdk"):
        async with changed:
            await changed.promises.resolve(approval, "yes")
            for _ in range(100):
                await changed.settle()
                if await task_state(changed, "nd") == TaskState.HALTED:
                    break
            assert await task_state(changed, "nd") == TaskState.HALTED
            promise = await changed.promises.get("nd")
            assert promise.pending  # the execution did not advance
    message = "\n".join(r.getMessage() for r in caplog.records)
    assert "non-determinism in execution 'nd' at 'nd:0'" in message
    assert "'run:step_b'" in message and "'run:step_a'" in message

    # The operator deploys code that matches the history and continues the task.
    fixed = VirtualTroth(db=str(db))
    fixed.register(original, name="flow")
    async with fixed:
        status, _ = await fixed.runtime.network.send("task.continue", TaskContinueRequest("nd"))
        assert status == 200
        assert await asyncio.wait_for(fixed.get("nd").result(), 10) == "a:yes"


async def test_an_execution_stays_pinned_to_the_version_it_started_with(tmp_path):
    db = tmp_path / "t.db"

    async def v1(ctx: Context) -> str:
        await ctx.run(step_a)
        return f"v1:{await ctx.promise()}"

    async def v2(ctx: Context) -> str:
        await ctx.run(step_a)
        return f"v2:{await ctx.promise()}"

    approval = await start_and_park(db, v1, "pinned", version=1)

    app = VirtualTroth(db=str(db))
    app.register(v1, name="flow", version=1)
    app.register(v2, name="flow", version=2)
    async with app:
        await app.promises.resolve(approval, "ok")
        assert await asyncio.wait_for(app.get("pinned").result(), 10) == "v1:ok"
        fresh = app.run("fresh", "flow")
        fresh_approval = "fresh:1"
        for _ in range(100):
            await app.settle()
            try:
                await app.promises.resolve(fresh_approval, "new")
                break
            except Exception:
                await asyncio.sleep(0.01)
        assert await asyncio.wait_for(fresh.result(), 10) == "v2:new"


async def test_a_worker_without_the_pinned_version_releases_the_task_loudly(tmp_path, caplog):
    db = tmp_path / "t.db"

    async def v1(ctx: Context) -> str:
        await ctx.run(step_a)
        return f"v1:{await ctx.promise()}"

    async def v2(ctx: Context) -> str:
        return "v2"

    approval = await start_and_park(db, v1, "old", version=1)

    newer = VirtualTroth(db=str(db))
    newer.register(v2, name="flow", version=2)
    with caplog.at_level(logging.ERROR, logger="troth.sdk"):
        async with newer:
            await newer.promises.resolve(approval, "ok")
            for _ in range(50):
                await newer.settle()
                if any("version 1" in r.getMessage() for r in caplog.records):
                    break
            assert await task_state(newer, "old") in (TaskState.PENDING, TaskState.ACQUIRED)
    assert any(
        "no function 'flow' version 1 is registered" in r.getMessage() for r in caplog.records
    )

    # A worker that has version 1 finishes it.
    older = VirtualTroth(db=str(db))
    older.register(v1, name="flow", version=1)
    async with older:
        assert await asyncio.wait_for(older.get("old").result(), 10) == "v1:ok"
