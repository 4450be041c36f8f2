"""An embedded app's requests do not each wake its timeouts loop: a workflow's commits arm
later deadlines (leases, retries) than the one the loop sleeps towards, so the loop reads
the next deadline about as often as the watch loop pokes it, not after every request; and
a deadline armed earlier (a short durable sleep) still fires on time."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

import pytest

from troth.sdk import Context, Troth
from troth.sdk.local import _WATCH, LocalNetwork

pytestmark = pytest.mark.anyio


async def test_a_workflows_requests_do_not_each_wake_the_timeouts_loop(tmp_path: Path):
    app = Troth(db=str(tmp_path / "troth.db"))

    @app.register
    def add_one(x: int) -> int:
        return x + 1

    @app.register
    async def five_steps(ctx: Context, x: int) -> int:
        for _ in range(5):
            x = await ctx.run(add_one, x)
        return x

    async with app:
        network = app.runtime.network
        assert isinstance(network, LocalNetwork)
        service = network.service
        read = service.next_deadline
        reads = 0

        async def counted() -> int | None:
            nonlocal reads
            reads += 1
            return await read()

        service.next_deadline = counted  # type: ignore[method-assign]
        begun = time.monotonic()
        for i in range(10):  # 10 executions, 12 requests each
            assert await app.run(f"w{i}", five_steps, i).result() == i + 5
        elapsed = time.monotonic() - begun
    # The watch loop pokes it once a period while this process commits; each poke that
    # finds nothing due costs one read. Every request waking it would cost ~120 and more.
    assert reads <= 3 + elapsed / _WATCH, (reads, elapsed)


async def test_an_earlier_deadline_still_fires_on_time(tmp_path: Path):
    app = Troth(db=str(tmp_path / "troth.db"))

    @app.register
    async def nap(ctx: Context) -> str:
        await ctx.sleep(timedelta(milliseconds=300))
        return "awake"

    async with app:
        await app.promises.create("far", timeout=3600)
        begun = time.monotonic()
        assert await app.run("nap", nap).result() == "awake"
        assert time.monotonic() - begun < 30  # woken for it, not at the far hour's deadline
