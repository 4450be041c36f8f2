"""Deadlines you can see: none unless one is given, and every ``TimedOutError`` says which
deadline fired and where it came from.

Before, a silent one-day deadline clipped every execution: a workflow sleeping two days
ended in a ``TimedOutError`` that named neither the deadline nor its source, and
``@app.register(timeout=...)`` was ignored by ``app.rpc``.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from troth.sdk import Context, TimedOutError
from troth.testing import VirtualTroth

pytestmark = pytest.mark.anyio


async def test_a_two_day_sleep_finishes_without_a_deadline():
    app = VirtualTroth()

    @app.register
    async def reminder(ctx: Context) -> str:
        await ctx.sleep(timedelta(days=2))
        return "reminded"

    async with app:
        assert await app.run("remind", reminder).result() == "reminded"
        root = await app.promises.get("remind")
    assert "troth:deadline" not in root.tags


async def test_the_app_default_deadline_is_named_when_it_fires():
    app = VirtualTroth(default_timeout=timedelta(hours=1))

    @app.register
    async def slow(ctx: Context) -> str:
        await ctx.sleep(timedelta(hours=2))
        return "late"

    async with app:
        with pytest.raises(TimedOutError) as caught:
            await app.run("slow", slow).result()
    error = caught.value
    assert error.promise_id == "slow" and error.source == "app"
    assert error.deadline == app.virtual_clock.now() - (app.virtual_clock.now() - error.deadline)
    assert "timed out at its deadline" in str(error) and "the app's default_timeout" in str(error)


async def test_a_registered_timeout_holds_for_every_way_of_starting():
    app = VirtualTroth()

    @app.register(timeout=timedelta(minutes=30))
    async def job(ctx: Context) -> str:
        return "done"

    async with app:
        start = app.now()
        for handle in (app.run("by-run", job), app.rpc("by-rpc", job), app.rpc("by-name", "job")):
            await handle.result()
            root = await app.promises.get(handle.id)
            assert root.tags["troth:deadline"] == "register", handle.id
            assert root.record.timeout_at == start + 30 * 60_000, handle.id


async def test_a_child_clamped_by_its_parent_says_so():
    app = VirtualTroth()

    @app.register
    async def parent(ctx: Context) -> str:
        return await ctx.promise(timeout=timedelta(days=10))  # past the parent's deadline

    async with app:
        with pytest.raises(TimedOutError, match="the call's timeout option"):
            await app.options(timeout=timedelta(hours=1)).run("clamped", parent).result()
        child = await app.promises.get("clamped:0")
    assert child.tags["troth:deadline"] == "parent"
    with pytest.raises(TimedOutError, match="the deadline of the execution that called it"):
        child.value()
