"""The ``inline`` option: a plain ``def`` step runs on the event loop's own thread.

By default a ``def`` step runs in a worker thread (``asyncio.to_thread``) so a long step
cannot starve the heartbeat; the hand-off costs more than a cheap step (bench/README.md).
With ``ctx.options(inline=True)`` (or ``@app.register(inline=True)`` for the function's
every call) the step runs on the loop's thread instead; a call's option overrides the
registered default. The thread a step ran on is observed with ``threading.get_ident``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from datetime import timedelta

import pytest

from troth.sdk import Context

pytestmark = pytest.mark.anyio


def where() -> int:
    return threading.get_ident()


async def test_a_step_runs_on_the_loop_only_with_the_option(make_app, uid):
    app = make_app()

    @app.register
    async def flow(ctx: Context) -> dict[str, int]:
        return {
            "loop": threading.get_ident(),
            "default": await ctx.run(where),
            "inline": await ctx.options(inline=True).run(where),
            "not inline": await ctx.options(inline=False).run(where),
        }

    async with app:
        seen = await asyncio.wait_for(app.run(f"{uid}-opt", flow).result(), 20)
    assert seen["inline"] == seen["loop"]
    assert seen["default"] != seen["loop"]
    assert seen["not inline"] != seen["loop"]


async def test_a_registered_default_that_a_call_overrides(make_app, uid):
    app = make_app()
    app.register(inline=True)(where)

    @app.register
    async def flow(ctx: Context) -> dict[str, int]:
        return {
            "loop": threading.get_ident(),
            "registered": await ctx.run(where),
            "by name": await ctx.run("where"),
            "overridden": await ctx.options(inline=False).run(where),
        }

    async with app:
        seen = await asyncio.wait_for(app.run(f"{uid}-reg", flow).result(), 20)
    assert seen["registered"] == seen["loop"]
    assert seen["by name"] == seen["loop"]
    assert seen["overridden"] != seen["loop"]


def dawdle() -> str:
    time.sleep(0.3)
    return "done"


async def test_an_inline_step_that_holds_the_loop_is_an_error_once_per_step(make_app, uid, caplog):
    # A stall is a quarter of a 1 s lease (250 ms) or more: each step holds the loop 300 ms.
    app = make_app(ttl=timedelta(seconds=1))

    @app.register
    async def flow(ctx: Context) -> list[str]:
        inline = ctx.options(inline=True)
        return [await inline.run(dawdle), await inline.run(dawdle), await ctx.run(where) and "ok"]

    with caplog.at_level(logging.WARNING, logger="troth.sdk"):
        async with app:
            result = await asyncio.wait_for(app.run(f"{uid}-slow", flow).result(), 20)
    assert result == ["done", "done", "ok"]
    said = [r for r in caplog.records if "blocked the event loop" in r.getMessage()]
    assert [r.levelname for r in said] == ["ERROR", "ERROR"], [r.getMessage() for r in said]
    assert all("dawdle" in r.getMessage() and f"{uid}-slow" in r.getMessage() for r in said)
    assert "lease is 1 s" in said[0].getMessage()
    steps = {r.getMessage().split("(")[1].split(")")[0] for r in said}
    assert len(steps) == 2, steps  # once per step: each names its own


async def test_inline_must_be_true_or_false(make_app, uid):
    app = make_app()
    with pytest.raises(TypeError, match="inline option is True or False"):
        app.register(where, inline="yes")  # type: ignore[call-overload]

    @app.register
    async def flow(ctx: Context) -> str:
        try:
            ctx.options(inline=1)  # type: ignore[typeddict-item]
        except TypeError as e:
            return str(e)
        return "accepted"

    async with app:
        said = await asyncio.wait_for(app.run(f"{uid}-bad", flow).result(), 20)
    assert said == "the inline option is True or False, not 1"
