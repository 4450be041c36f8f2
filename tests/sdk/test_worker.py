"""The worker loop against a real server: leases, the concurrency bound, reconnection."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import pytest

from troth.sdk import Context, Troth

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # slow: a troth serve process


async def test_the_heartbeat_keeps_a_long_step_from_losing_its_lease(server, uid):
    app = Troth(url=server.url, group=uid, ttl=timedelta(seconds=1))
    runs: list[float] = []

    def slow() -> str:
        runs.append(time.monotonic())
        time.sleep(2.5)  # well past the 1 s lease; only heartbeats keep the task ours
        return "done"

    @app.register
    async def flow(ctx: Context) -> str:
        return await ctx.run(slow)

    async with app:
        assert await asyncio.wait_for(app.run(f"{uid}-hb", flow).result(), 20) == "done"
    assert len(runs) == 1


async def test_no_more_than_the_concurrency_bound_of_tasks_run_at_once(server, uid):
    app = Troth(url=server.url, group=uid, concurrency=2)
    running = 0
    peak = 0

    async def busy() -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.2)
        running -= 1

    @app.register
    async def flow(ctx: Context, n: int) -> int:
        await ctx.run(busy)
        return n

    async with app:
        handles = [app.rpc(f"{uid}-c{n}", flow, n) for n in range(6)]
        assert await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 20) == [
            0, 1, 2, 3, 4, 5,
        ]  # fmt: skip
    assert peak == 2


async def test_the_worker_reconnects_after_the_server_restarts(start_server, uid):
    first = start_server()
    app = Troth(url=first.url, group=uid)

    @app.register
    async def echo(ctx: Context, x: int) -> int:
        return x

    async with app:
        assert await asyncio.wait_for(app.rpc(f"{uid}-1", echo, 1).result(), 20) == 1
        first.kill()
        await asyncio.sleep(0.5)  # the stream drops; the worker backs off and retries
        first.start()  # the same port and database
        for _ in range(100):  # until the worker's poll stream is back
            if app.runtime.network.connected.is_set():
                break
            await asyncio.sleep(0.1)
        assert app.runtime.network.connected.is_set()
        assert await asyncio.wait_for(app.rpc(f"{uid}-2", echo, 2).result(), 20) == 2
