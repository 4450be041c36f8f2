"""A halted execution is visible: its callers get ``HaltedError`` with the reason instead of
waiting for ever, ``status()`` says ``halted``, and ``app.executions.resume`` continues it
once the code matches its history.

Before, the worker halted the task (``task.halt``) and logged the reason in its own
process only; every ``handle.result()`` waited for ever.
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
from troth.sdk import Context, ExecutionStatus, HaltedError, ServerError, Troth

pytestmark = pytest.mark.anyio

LEDGER: Counter[str] = Counter()
AMOUNT = {"now": 100}  # what the "deployed" code charges; a test changes it between runs
PROMPT = 10.0  # seconds within which a halt must reach a caller


def charge_card(account: str, amount: int) -> str:
    LEDGER[f"charge {account} {amount}"] += 1
    return f"charged {account} {amount}"


async def flow(ctx: Context) -> str:
    receipt = await ctx.run(charge_card, "acct", AMOUNT["now"])
    await ctx.promise(id=f"{ctx.id}:approval")
    return receipt


@pytest.fixture(autouse=True)
def fresh_state() -> None:
    LEDGER.clear()
    AMOUNT["now"] = 100


async def until_pending(app: Troth, id: str) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if (await app.promises.get(id)).pending:
                return
        except Exception:
            pass  # not created yet
        await asyncio.sleep(0.01)
    raise AssertionError(f"{id} was never created")


async def halted(waiting: Any) -> HaltedError:
    with pytest.raises(HaltedError) as e:
        await asyncio.wait_for(waiting, PROMPT)
    return e.value


@pytest.fixture(params=MODES)
def apps(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[..., Troth]:
    """Apps that share one history (one database file, or one server): workers, or with
    ``caller=True`` an app that only calls. Against a server that is an app in a group of
    its own, listening; embedded, where every process on the file serves every group, it is
    an app that is not started (a script), so it polls. Embedded apps run on the wall
    clock, as processes sharing a file do (virtual time is one process's, and would jump
    to the deadline of the approval awaited here)."""
    if request.param == "embedded":
        db = str(tmp_path / "t.db")

        def embedded(caller: bool = False) -> Troth:
            return Troth(group="callers" if caller else "default", db=db)

        return embedded
    server = request.getfixturevalue("server")
    group = f"g{uuid.uuid4().hex[:8]}"

    def remote(caller: bool = False) -> Troth:
        return Troth(url=server.url, group=f"{group}-callers" if caller else group)

    return remote


async def test_the_app_that_runs_a_halted_execution_reports_and_resumes_it(apps, uid):
    app = apps()
    app.register(flow, name="flow")
    async with app:
        handle = app.run(uid, flow)
        await until_pending(app, f"{uid}:approval")
        assert await handle.status() in (ExecutionStatus.RUNNING, ExecutionStatus.SUSPENDED)
        while await handle.status() == ExecutionStatus.RUNNING:
            await asyncio.sleep(0.01)  # suspending on its approval
        assert await handle.status() == ExecutionStatus.SUSPENDED
        AMOUNT["now"] = 200  # a deploy that changed the step's arguments
        await app.promises.resolve(f"{uid}:approval", "ok")

        error = await halted(handle.result())
        assert error.id == uid
        assert error.reason is not None and "other arguments" in error.reason
        assert "app.executions.resume" in str(error)
        record = await app.promises.get(f"{uid}:halt1")  # where an operator reads it
        assert record.value()["reason"] == error.reason
        assert await handle.status() == ExecutionStatus.HALTED
        assert await app.executions.status(uid) == ExecutionStatus.HALTED
        await halted(app.get(uid).result())  # asked after the halt, too

        AMOUNT["now"] = 100  # the code matches its history again
        await app.executions.resume(uid)
        assert await asyncio.wait_for(handle.result(), PROMPT) == "charged acct 100"
        assert await handle.status() == ExecutionStatus.RESOLVED
    assert LEDGER == {"charge acct 100": 1}


async def test_a_halt_after_a_resume_is_reported_again(apps, uid):
    app = apps()
    app.register(flow, name="flow")
    async with app:
        handle = app.run(uid, flow)
        await until_pending(app, f"{uid}:approval")
        AMOUNT["now"] = 200
        await app.promises.resolve(f"{uid}:approval", "ok")
        first = await halted(handle.result())
        AMOUNT["now"] = 300  # a second wrong fix
        await app.executions.resume(uid)
        second = await halted(handle.result())
        assert first.reason != second.reason
        assert "digest" in (second.reason or "")
    assert LEDGER == {"charge acct 100": 1}


@pytest.mark.slow  # a caller in a second process
async def test_a_caller_in_another_process_sees_the_halt_and_the_resumed_result(apps, uid):
    first = apps()
    first.register(flow, name="flow")
    async with first:
        first.run(uid, flow)
        await until_pending(first, f"{uid}:approval")
    assert LEDGER == {"charge acct 100": 1}

    caller = apps(caller=True)
    if caller.url is not None:
        await caller.start()
    try:
        waiting = asyncio.ensure_future(caller.get(uid).result())  # waits before the halt
        AMOUNT["now"] = 200  # redeployed with a changed step
        changed = apps()
        changed.register(flow, name="flow")
        async with changed:
            await asyncio.sleep(0.2)  # the caller is listening
            assert not waiting.done()
            await changed.promises.resolve(f"{uid}:approval", "ok")
            error = await halted(waiting)
            assert error.id == uid and "other arguments" in (error.reason or "")
            await halted(caller.get(uid).result())
            assert await caller.get(uid).status() == ExecutionStatus.HALTED

        AMOUNT["now"] = 100  # redeployed with code that matches the history
        fixed = apps()
        fixed.register(flow, name="flow")
        async with fixed:
            await caller.executions.resume(uid)
            result = caller.get(uid).result()
            assert await asyncio.wait_for(result, PROMPT) == "charged acct 100"
    finally:
        await caller.stop()
    assert LEDGER == {"charge acct 100": 1}


async def test_resuming_an_execution_that_is_not_halted_says_so(apps, uid):
    app = apps()
    app.register(flow, name="flow")
    async with app:
        handle = app.run(uid, flow)
        await until_pending(app, f"{uid}:approval")
        with pytest.raises(ServerError, match="not halted"):
            await app.executions.resume(uid)
        await app.promises.resolve(f"{uid}:approval", "ok")
        assert await handle.result() == "charged acct 100"
