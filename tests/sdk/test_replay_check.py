"""Replay is exact or refused: a changed program never gets another call's result and
never runs a finished step again because the numbering shifted.

Each scenario starts an execution with one app, lets it record some steps and park on an
external promise, then resumes it with another app (same database, or same server and
group) whose code may have changed, the way a redeploy meets executions in flight. The
side-effecting steps append to a ledger, so "ran again" is observed, not inferred.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.sdk.modes import MODES
from troth.protocol.records import TaskState
from troth.protocol.requests import TaskGetRequest
from troth.sdk import Context, Troth
from troth.testing import VirtualTroth

pytestmark = pytest.mark.anyio

LEDGER: Counter[str] = Counter()


def charge_card(account: str, amount: int) -> str:
    LEDGER[f"charge {account} {amount}"] += 1
    return f"charged {account} {amount}"


def slow_work(n: int, seconds: float) -> int:
    time.sleep(seconds)
    LEDGER[f"work {n}"] += 1
    return n * 10


def finish(value: int) -> int:
    LEDGER[f"finish {value}"] += 1
    return value + 1


@pytest.fixture(autouse=True)
def fresh_ledger() -> None:
    LEDGER.clear()


@pytest.fixture(params=MODES)
def make_app(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], Troth]:
    """Apps that share one history: one database file, or one server and group."""
    if request.param == "embedded":
        return lambda: VirtualTroth(db=str(tmp_path / "t.db"), autojump=False)
    server = request.getfixturevalue("server")
    group = f"g{uuid.uuid4().hex[:8]}"
    return lambda: Troth(url=server.url, group=group)


async def _pump(app: Troth) -> None:
    if isinstance(app, VirtualTroth):
        await app.settle()
    await asyncio.sleep(0.02)


async def park(make_app: Callable[[], Troth], flow: Any, id: str) -> None:
    """Run ``flow`` until it waits on its approval promise ``<id>:approval``."""
    app = make_app()
    app.register(flow, name="flow")
    async with app:
        app.run(id, "flow")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            await _pump(app)
            try:
                if (await app.promises.get(f"{id}:approval")).pending:
                    return
            except Exception:
                pass
        raise AssertionError(f"{id} never reached its approval")


async def resume(make_app: Callable[[], Troth], flow: Any, id: str) -> tuple[str, Any]:
    """Approve with code ``flow`` deployed: ("halted", None) or ("done", the result)."""
    app = make_app()
    app.register(flow, name="flow")
    async with app:
        await app.promises.resolve(f"{id}:approval", "ok")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            await _pump(app)
            status, body = await app.runtime.network.send("task.get", TaskGetRequest(id))
            assert status == 200
            if body.task.state == TaskState.HALTED:
                return "halted", None
            promise = await app.promises.get(id)
            if not promise.pending:
                return "done", promise.value()
    raise AssertionError(f"{id} neither finished nor halted")


# -- concurrent branches over one context --------------------------------------------------


async def branch(ctx: Context, n: int, seconds: float) -> int:
    first = await ctx.run(slow_work, n, seconds)
    return await ctx.run(finish, first)


async def gathered(ctx: Context) -> list[int]:
    # Branch 1's first step is slow, so on the first run branch 2 makes its second call
    # first (call 2 is finish(20), call 3 finish(10)); on replay both first steps answer at
    # once and branch 1 makes its second call first. Answering it from call 2's record
    # would give branch 1 branch 2's result.
    results = await asyncio.gather(branch(ctx, 1, 0.3), branch(ctx, 2, 0.0))
    await ctx.promise(id=f"{ctx.id}:approval")
    return list(results)


async def test_branches_that_interleave_differently_on_replay_are_refused(make_app, uid):
    await park(make_app, gathered, uid)
    assert LEDGER == {"work 1": 1, "work 2": 1, "finish 20": 1, "finish 10": 1}
    outcome = await resume(make_app, gathered, uid)
    # Before the check compared arguments, this returned [21, 11]: each branch got the
    # other's result.
    assert outcome == ("halted", None)
    assert LEDGER == {"work 1": 1, "work 2": 1, "finish 20": 1, "finish 10": 1}


# -- calls removed between runs --------------------------------------------------------------


def with_value(kind: str) -> Any:
    async def flow(ctx: Context) -> str:
        if kind == "uuid":
            await ctx.uuid()
        elif kind == "random":
            await ctx.random()
        receipt = await ctx.run(charge_card, "acct", 100)
        await ctx.promise(id=f"{ctx.id}:approval")
        return receipt

    return flow


async def without_value(ctx: Context) -> str:
    receipt = await ctx.run(charge_card, "acct", 100)
    await ctx.promise(id=f"{ctx.id}:approval")
    return receipt


@pytest.mark.parametrize("kind", ["uuid", "random"])
async def test_removing_a_recorded_value_does_not_charge_again(make_app, uid, kind):
    await park(make_app, with_value(kind), uid)
    assert LEDGER == {"charge acct 100": 1}
    outcome = await resume(make_app, without_value, uid)
    # Before values were recorded, charge_card took the removed call's number and ran again.
    assert outcome == ("halted", None)
    assert LEDGER == {"charge acct 100": 1}


async def with_named_promise(ctx: Context) -> str:
    note = ctx.promise(id=f"{ctx.id}:note")  # named: it takes no position
    receipt = await ctx.run(charge_card, "acct", 100)
    await ctx.promise(id=f"{ctx.id}:approval")
    del note
    return receipt


async def test_removing_a_named_promise_shifts_nothing(make_app, uid):
    await park(make_app, with_named_promise, uid)
    outcome = await resume(make_app, without_value, uid)
    assert outcome == ("done", "charged acct 100")
    assert LEDGER == {"charge acct 100": 1}


# -- calls changed between runs --------------------------------------------------------------


async def charge_200(ctx: Context) -> str:
    receipt = await ctx.run(charge_card, "acct", 200)
    await ctx.promise(id=f"{ctx.id}:approval")
    return receipt


async def test_a_step_called_with_other_arguments_is_refused(make_app, uid):
    await park(make_app, without_value, uid)
    outcome = await resume(make_app, charge_200, uid)
    assert outcome == ("halted", None)
    assert LEDGER == {"charge acct 100": 1}  # neither the old result nor a new charge


async def two_steps(ctx: Context) -> str:
    receipt = await ctx.run(charge_card, "acct", 100)
    await ctx.run(finish, 1)
    await ctx.promise(id=f"{ctx.id}:approval")
    return receipt


async def one_step_then_done(ctx: Context) -> str:
    # The approval and the second step are gone: the history is longer than the code.
    return await ctx.run(charge_card, "acct", 100)


async def test_code_that_ends_before_its_history_is_refused(make_app, uid):
    await park(make_app, two_steps, uid)
    outcome = await resume(make_app, one_step_then_done, uid)
    assert outcome == ("halted", None)
    assert LEDGER == {"charge acct 100": 1, "finish 1": 1}


async def test_unchanged_code_replays_with_unencodable_step_arguments(make_app, uid):
    """A local step may take a value with no JSON form (a connection); its digest counts
    the type only, so the same code replays."""

    class Conn:
        def __init__(self) -> None:
            self.opened = time.monotonic()  # differs every run

    def query(conn: Conn, sql: str) -> int:
        LEDGER[sql] += 1
        return 7

    async def flow(ctx: Context) -> int:
        rows = await ctx.run(query, Conn(), "select 1")
        await ctx.promise(id=f"{ctx.id}:approval")
        return rows

    await park(make_app, flow, uid)
    assert await resume(make_app, flow, uid) == ("done", 7)
    assert LEDGER == {"select 1": 1}


# -- options that are not part of the call ---------------------------------------------------


async def charged_inline(ctx: Context) -> str:
    receipt = await ctx.options(inline=True).run(charge_card, "acct", 100)
    await ctx.promise(id=f"{ctx.id}:approval")
    return receipt


async def test_running_a_step_inline_now_is_the_same_call(make_app, uid):
    # Where a plain step runs (a thread, or the loop with ``inline``) is not recorded:
    # switching it between deploys replays the recorded step instead of halting.
    await park(make_app, without_value, uid)
    outcome = await resume(make_app, charged_inline, uid)
    assert outcome == ("done", "charged acct 100")
    assert LEDGER == {"charge acct 100": 1}
