"""An execution id names one piece of work: starting it again with the same function and
arguments joins the execution, with other work raises ``IdempotencyConflictError``.

Before the root promise recorded its function and an argument digest, starting
``order-7`` with another function or other arguments silently returned the first
execution's result.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from troth.sdk import Context, IdempotencyConflictError, Troth

pytestmark = pytest.mark.anyio

RUNS: Counter[str] = Counter()


@pytest.fixture(autouse=True)
def fresh_runs() -> None:
    RUNS.clear()


async def charge(ctx: Context, account: str, cents: int) -> str:
    RUNS[f"charge {account} {cents}"] += 1
    return f"charged {account} {cents}"


async def refund(ctx: Context, account: str, cents: int) -> str:
    RUNS[f"refund {account} {cents}"] += 1
    return f"refunded {account} {cents}"


async def parked(ctx: Context, account: str) -> str:
    """Waits on an approval, so that a second start meets a live execution."""
    RUNS[f"parked {account}"] += 1
    await ctx.promise(id=f"{ctx.id}:approval")
    return f"approved {account}"


def registered(app: Troth) -> Troth:
    for fn in (charge, refund, parked):
        app.register(fn)
    return app


async def conflict(handle: Any) -> IdempotencyConflictError:
    """The conflict, raised alike by ``started()`` and by ``result()``."""
    with pytest.raises(IdempotencyConflictError) as started:
        await handle.started()
    with pytest.raises(IdempotencyConflictError) as result:
        await handle.result()
    assert str(result.value) == str(started.value)
    return started.value


@pytest.mark.parametrize("start", ["run", "rpc"])
async def test_the_same_id_with_another_function_is_refused(make_app, uid, start):
    async with registered(make_app()) as app:
        assert await getattr(app, start)(uid, charge, "acct", 100).result() == "charged acct 100"
        error = await conflict(getattr(app, start)(uid, refund, "acct", 100))
        assert (error.id, error.differs) == (uid, "function")
        assert (error.recorded, error.requested) == ("charge", "refund")
        assert uid in str(error) and "'charge'" in str(error)
    assert RUNS == {"charge acct 100": 1}


@pytest.mark.parametrize("start", ["run", "rpc"])
async def test_the_same_id_with_other_arguments_is_refused(make_app, uid, start):
    async with registered(make_app()) as app:
        await getattr(app, start)(uid, charge, "acct", 100).result()
        error = await conflict(getattr(app, start)(uid, charge, "acct", 200))
        assert (error.id, error.differs) == (uid, "arguments")
        assert error.recorded != error.requested
        # Keyword or positional, the arguments are other ones too.
        await conflict(getattr(app, start)(uid, charge, account="acct", cents=100))
    assert RUNS == {"charge acct 100": 1}


@pytest.mark.parametrize("start", ["run", "rpc"])
async def test_the_same_function_and_arguments_join_the_execution(make_app, uid, start):
    async with registered(make_app()) as app:
        first = getattr(app, start)(uid, charge, "acct", 100)
        again = getattr(app, start)(uid, charge, "acct", 100)
        assert await first.result() == "charged acct 100"
        assert await again.result() == "charged acct 100"
        assert await getattr(app, start)(uid, charge, "acct", 100).result() == "charged acct 100"
    assert RUNS == {"charge acct 100": 1}


async def test_a_live_execution_is_judged_too(make_app, uid):
    """A start that meets the execution while it waits (its task held or suspended, not
    finished) is judged the same way, whichever way each was started."""
    async with registered(make_app()) as app:
        first = app.run(uid, parked, "acct")
        await first.started()
        while (await app.promises.get(uid)).pending:
            try:
                if (await app.promises.get(f"{uid}:approval")).pending:
                    break
            except Exception:
                pass  # not created yet
        assert (await conflict(app.run(uid, charge, "acct", 1))).differs == "function"
        assert (await conflict(app.rpc(uid, parked, "other"))).differs == "arguments"
        joined = app.rpc(uid, parked, "acct")
        await joined.started()
        await app.promises.resolve(f"{uid}:approval", "ok")
        assert await joined.result() == "approved acct"
        assert await first.result() == "approved acct"
    assert RUNS == {"parked acct": 2}  # the run and its replay after the approval


async def test_a_promise_that_names_no_work_is_joined(make_app, uid):
    """A root created without troth's tags (a plain promise, another SDK) is not judged."""
    async with registered(make_app()) as app:
        await app.promises.create(uid, timeout=60)
        handle = app.rpc(uid, charge, "acct", 100)
        await handle.started()
        await app.promises.resolve(uid, "settled outside")
        assert await handle.result() == "settled outside"
    assert RUNS == {}
