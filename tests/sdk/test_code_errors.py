"""A bug in a durable function's own code halts it instead of burning its id
(``Troth(halt_on=...)``, ``troth.sdk.errors.CodeError``): the caller gets ``HaltedError``
with the traceback, and once the code is fixed, resuming replays the recorded steps (none
runs again) and finishes. A failure of a step, re-raised through the workflow, still
rejects it, and so does any error outside ``halt_on``."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from troth import Context, ExecutionStatus, HaltedError, Never, Troth

pytestmark = pytest.mark.anyio


async def test_a_type_error_of_the_workflow_halts_it_and_a_fix_resumes_it(
    make_app: Callable[..., Troth], uid: str
) -> None:
    app = make_app()
    charged: list[int] = []
    fixed = False

    def charge(amount: int) -> int:
        charged.append(amount)
        return amount

    @app.register
    async def checkout(ctx: Context, amount: int) -> str:
        paid = await ctx.run(charge, amount)
        receipt = "paid " + (str(paid) if fixed else paid)  # type: ignore[operator]
        return receipt

    async with app:
        handle = app.run(f"{uid}-order", checkout, 30)
        with pytest.raises(HaltedError) as e:
            await handle.result()
        assert "TypeError" in e.value.reason and "in its own code" in e.value.reason
        assert "receipt = " in e.value.reason  # the traceback, down to the line
        assert await handle.status() == ExecutionStatus.HALTED
        fixed = True  # the fix is deployed
        await app.executions.resume(f"{uid}-order")
        assert await app.get(f"{uid}-order").result() == "paid 30"
    assert charged == [30]  # the recorded step did not run again


async def test_a_steps_failure_and_errors_outside_halt_on_still_reject(
    make_app: Callable[..., Troth], uid: str
) -> None:
    app = make_app(halt_on=(NameError,))

    def broken() -> None:
        raise TypeError("a bug in a step")

    @app.register
    async def step_fails(ctx: Context) -> None:
        await ctx.options(retry=Never()).run(broken)

    @app.register
    async def own_type_error(ctx: Context) -> None:
        raise TypeError("not in this app's halt_on")

    @app.register
    async def own_name_error(ctx: Context) -> None:
        raise NameError("undefined_thing")

    async with app:
        with pytest.raises(TypeError, match="a bug in a step"):
            await app.run(f"{uid}-step", step_fails).result()
        with pytest.raises(TypeError, match="not in this app's halt_on"):
            await app.run(f"{uid}-own", own_type_error).result()
        with pytest.raises(HaltedError, match="NameError"):
            await app.run(f"{uid}-name", own_name_error).result()


def test_halt_on_must_name_exception_types() -> None:
    with pytest.raises(TypeError, match="halt_on"):
        Troth(db=":memory:", halt_on=("TypeError",))  # type: ignore[arg-type]
