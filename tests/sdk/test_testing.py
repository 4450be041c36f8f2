"""``troth.testing``: virtual time makes long waits instant and keeps them faithful."""

from __future__ import annotations

import asyncio
import itertools
import time
from datetime import timedelta

import pytest

from troth.sdk import Context, Linear, TimedOutError
from troth.testing import VirtualTroth

pytestmark = pytest.mark.anyio


async def test_a_workflow_that_sleeps_for_a_day_finishes_in_well_under_a_second():
    app = VirtualTroth()

    @app.register
    async def remind(ctx: Context, who: str) -> str:
        await ctx.sleep(timedelta(days=1))
        return f"reminded {who}"

    started = time.monotonic()
    async with app:
        began = app.now()
        assert await app.options(timeout=timedelta(days=2)).run("r-1", remind, "ana").result() == (
            "reminded ana"
        )
        assert app.now() - began >= 86_400_000
    assert time.monotonic() - started < 30  # a day of virtual time, not of waiting


async def test_backoff_between_retries_is_virtual_too():
    app = VirtualTroth()
    attempts: list[int] = []

    def flaky() -> str:
        attempts.append(app.now())
        if len(attempts) < 4:
            raise ConnectionError("down")
        return "up"

    @app.register
    async def flow(ctx: Context) -> str:
        return await ctx.options(retry=Linear(step=60, max_delay=600)).run(flaky)

    async with app:
        assert await app.run("retry", flow).result() == "up"
    gaps = [b - a for a, b in itertools.pairwise(attempts)]
    assert gaps == [60_000, 120_000, 180_000]


async def test_without_autojump_time_moves_only_when_advanced():
    app = VirtualTroth(autojump=False)

    @app.register
    async def wait(ctx: Context) -> str:
        try:
            await ctx.promise(timeout=timedelta(hours=1))
        except TimedOutError:
            return "timed out"
        return "answered"

    async with app:
        handle = app.run("w", wait)
        await app.advance(timedelta(minutes=59))
        assert not await handle.done()
        await app.advance(timedelta(minutes=2))
        assert await asyncio.wait_for(handle.result(), 5) == "timed out"
