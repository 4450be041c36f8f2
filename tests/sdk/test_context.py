"""Every ``Context`` operation, in embedded mode (virtual time) and against ``troth serve``."""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta

import pytest

from troth.sdk import Context, Linear, Never, TimedOutError, Troth

pytestmark = pytest.mark.anyio

WAIT = 20  # seconds a remote test may take before it is a failure


async def result(app: Troth, id: str, fn, *args, **kwargs):
    return await asyncio.wait_for(app.run(id, fn, *args, **kwargs).result(), WAIT)


async def test_run_records_plain_and_async_steps_once(make_app, uid):
    app = make_app()
    calls: Counter[str] = Counter()

    def double(x: int) -> int:
        calls["double"] += 1
        return 2 * x

    async def inc(x: int) -> int:
        calls["inc"] += 1
        return x + 1

    @app.register
    async def flow(ctx: Context, x: int) -> int:
        y = await ctx.run(double, x)
        return await ctx.run(inc, y)

    async with app:
        assert await result(app, f"{uid}-run", flow, 20) == 41
        # Joining a finished execution answers its recorded value without running anything.
        assert await result(app, f"{uid}-run", flow, 20) == 41
    assert calls == {"double": 1, "inc": 1}


async def test_rpc_runs_a_registered_function_and_returns_its_value(make_app, uid):
    app = make_app()

    @app.register
    async def square(ctx: Context, x: int) -> int:
        return x * x

    @app.register
    async def flow(ctx: Context, x: int) -> int:
        return await ctx.rpc("square", x) + await ctx.rpc(square, x + 1)

    async with app:
        assert await result(app, f"{uid}-rpc", flow, 3) == 9 + 16


async def test_app_rpc_starts_an_execution_on_a_worker_of_the_group(make_app, uid):
    app = make_app()

    @app.register
    def shout(word: str) -> str:
        return word.upper()

    async with app:
        handle = app.rpc(f"{uid}-shout", "shout", "hey")
        assert await asyncio.wait_for(handle.result(), WAIT) == "HEY"
        assert await asyncio.wait_for(app.get(f"{uid}-shout").result(), WAIT) == "HEY"


async def test_sleep_suspends_and_resumes_after_the_deadline(make_app, uid):
    app = make_app()
    steps: Counter[str] = Counter()

    @app.register
    async def nap(ctx: Context) -> float:
        start = await ctx.now()
        steps["before"] += 1
        await ctx.sleep(timedelta(seconds=0.3))
        steps["after"] += 1
        end = await ctx.now()
        return (end - start).total_seconds()

    async with app:
        slept = await result(app, f"{uid}-nap", nap)
    assert slept >= 0.3
    # The function re-ran from the top after the resume: the code before the sleep ran
    # twice, the recorded steps did not.
    assert steps == {"before": 2, "after": 1}


async def test_gather_fans_out_and_in_with_ids_in_call_order(make_app, uid):
    app = make_app()

    @app.register
    async def square(ctx: Context, x: int) -> int:
        return x * x

    @app.register
    async def fan(ctx: Context, n: int) -> list[int]:
        remote = [ctx.begin_rpc(square, i) for i in range(n)]
        local = [ctx.begin_run(lambda i=i: i + 100) for i in range(n)]
        return list(await asyncio.gather(*remote)) + list(await asyncio.gather(*local))

    async with app:
        assert await result(app, f"{uid}-fan", fan, 4) == [0, 1, 4, 9, 100, 101, 102, 103]
        child = await app.promises.get(f"{uid}-fan:2")
        assert child.param() == {"func": "square", "args": [2], "version": 1}


async def test_external_promise_is_settled_from_outside(make_app, uid):
    app = make_app()
    asked: asyncio.Queue[str] = asyncio.Queue()

    @app.register
    async def approve(ctx: Context, amount: int) -> str:
        approval = ctx.promise(timeout=timedelta(hours=1))
        await ctx.run(asked.put_nowait, approval.id)
        ok = await approval
        return "approved" if ok else "declined"

    async with app:
        handle = app.run(f"{uid}-approve", approve, 10)
        promise_id = await asyncio.wait_for(asked.get(), WAIT)
        assert promise_id == f"{uid}-approve:0"
        await app.promises.resolve(promise_id, True)
        assert await asyncio.wait_for(handle.result(), WAIT) == "approved"


@pytest.mark.parametrize("name", ["{root}.approval", "approval-{root}"])
async def test_an_external_promise_named_outside_the_execution_is_awaited(make_app, uid, name):
    # Its deadline timer (``<id>:deadline``) roots a tree of its own; it was refused with
    # a 400 for a ':' in its origin tag, so such a promise could not be awaited at all.
    app = make_app()
    asked: asyncio.Queue[str] = asyncio.Queue()

    @app.register
    async def approve(ctx: Context) -> str:
        approval = ctx.promise(id=name.format(root=ctx.id), timeout=timedelta(hours=1))
        await ctx.run(asked.put_nowait, approval.id)
        return str(await approval)

    async with app:
        handle = app.run(f"{uid}-named", approve)
        promise_id = await asyncio.wait_for(asked.get(), WAIT)
        assert promise_id == name.format(root=f"{uid}-named")
        await app.promises.resolve(promise_id, "yes")
        assert await asyncio.wait_for(handle.result(), WAIT) == "yes"


async def test_an_external_promise_that_times_out_raises_timed_out(make_app, uid):
    app = make_app()

    @app.register
    async def wait_for_nobody(ctx: Context) -> str:
        try:
            await ctx.promise(timeout=timedelta(seconds=0.3))
        except TimedOutError:
            return "gave up"
        return "answered"

    async with app:
        assert await result(app, f"{uid}-nobody", wait_for_nobody) == "gave up"


async def test_detached_starts_an_independent_execution(make_app, uid):
    app = make_app()
    done = asyncio.Event()

    @app.register
    async def background(ctx: Context, x: int) -> int:
        await ctx.run(done.set)
        return x

    @app.register
    async def parent(ctx: Context) -> str:
        child = ctx.detached(background, 7)
        return child.id

    async with app:
        child_id = await result(app, f"{uid}-parent", parent)
        await asyncio.wait_for(done.wait(), WAIT)
        assert await asyncio.wait_for(app.get(child_id).result(), WAIT) == 7
        record = (await app.promises.get(child_id)).record
        # ``resonate:origin`` names a root (no ':'), so the detached child keeps its tree's
        # origin and starts a branch of its own.
        assert child_id == f"{uid}-parent:0"
        assert record.tags["resonate:origin"] == f"{uid}-parent"
        assert record.tags["resonate:branch"] == child_id


async def test_errors_round_trip_with_their_type(make_app, uid):
    app = make_app()

    @app.register(retry=Never())
    def refuse(reason: str) -> None:
        raise PermissionError(reason)

    @app.register
    async def flow(ctx: Context) -> str:
        try:
            await ctx.rpc(refuse, "nope")
        except PermissionError as e:
            return f"caught {e}"
        return "not raised"

    @app.register
    async def failing(ctx: Context) -> None:
        await ctx.options(retry=Linear(step=0.01, max_attempts=2)).run(refuse, "local")

    async with app:
        assert await result(app, f"{uid}-err", flow) == "caught nope"
        with pytest.raises(PermissionError, match="local") as info:
            await result(app, f"{uid}-fail", failing)
        assert "raised remotely" in "".join(info.value.__notes__)


async def test_plain_steps_retry_and_stop_at_the_policy(make_app, uid):
    app = make_app()
    attempts: Counter[str] = Counter()

    def flaky(name: str, failures: int) -> str:
        attempts[name] += 1
        if attempts[name] <= failures:
            raise ConnectionError(f"{name} attempt {attempts[name]}")
        return name

    @app.register
    async def flow(ctx: Context) -> list[str]:
        out = [await ctx.options(retry=Linear(step=0.05)).run(flaky, "twice", 2)]
        try:
            await ctx.options(retry=Linear(step=0.05, max_attempts=3)).run(flaky, "never", 5)
        except ConnectionError:
            out.append("gave up")
        try:
            await ctx.options(non_retryable=(ConnectionError,)).run(flaky, "typed", 5)
        except ConnectionError:
            out.append("not retried")
        return out

    async with app:
        assert await result(app, f"{uid}-retry", flow) == ["twice", "gave up", "not retried"]
    assert attempts == {"twice": 3, "never": 3, "typed": 1}


async def test_a_retry_never_outlives_the_step_deadline(make_app, uid):
    app = make_app()
    attempts = 0

    def always_fails() -> None:
        nonlocal attempts
        attempts += 1
        raise ValueError("no")

    @app.register
    async def flow(ctx: Context) -> str:
        try:
            await ctx.options(timeout=timedelta(seconds=0.5), retry=Linear(step=0.2)).run(
                always_fails
            )
        except ValueError:
            return "stopped"
        return "?"

    async with app:
        assert await result(app, f"{uid}-deadline", flow) == "stopped"
    # attempts at 0, 0.2 and 0.6 s would cross the 0.5 s deadline: the third never starts.
    assert attempts == 2


@dataclass
class Order:
    sku: str
    quantity: int


async def test_dataclasses_round_trip_through_signatures(make_app, uid):
    app = make_app()

    @app.register
    async def total(ctx: Context, order: Order) -> Order:
        assert isinstance(order, Order)
        return Order(order.sku, order.quantity * 2)

    @app.register
    async def flow(ctx: Context, order: Order) -> int:
        doubled = await ctx.rpc(total, order)
        assert isinstance(doubled, Order)
        return doubled.quantity

    async with app:
        assert await result(app, f"{uid}-dc", flow, Order("x", 2)) == 4


async def test_replay_stable_now_random_and_uuid(make_app, uid):
    app = make_app()
    seen: list[tuple] = []

    @app.register
    async def flow(ctx: Context) -> bool:
        stamp = await ctx.now()
        value = (stamp, await ctx.random(), await ctx.uuid())
        seen.append(value)
        await ctx.sleep(0.1)
        return isinstance(stamp, datetime)

    async with app:
        assert await result(app, f"{uid}-stable", flow)
    assert len(seen) == 2 and seen[0] == seen[1]


async def test_a_nested_durable_function_runs_locally_with_its_own_steps(make_app, uid):
    app = make_app()
    calls: Counter[int] = Counter()

    def work(i: int) -> int:
        calls[i] += 1
        return i

    async def branch(ctx: Context, i: int) -> int:
        a = await ctx.run(work, i)
        await ctx.sleep(0.1)
        return a + await ctx.run(work, i * 10)

    @app.register
    async def flow(ctx: Context) -> list[int]:
        return list(await asyncio.gather(ctx.run(branch, 1), ctx.run(branch, 2)))

    async with app:
        assert await result(app, f"{uid}-nested", flow) == [11, 22]
    assert calls == {1: 1, 10: 1, 2: 1, 20: 1}
