"""Options go through ``options(...)``; every argument after the function is the function's.

Before, ``timeout``, ``retry``, ``non_retryable``, ``target``, ``version``, ``id``, ``tags`` and
``options`` were taken out of the user's own keyword arguments: ``ctx.run(fetch, url,
timeout=5)`` ran ``fetch`` with its default timeout, and ``app.run(id, fn, id=42)`` failed.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from troth.sdk import Context, Linear

pytestmark = pytest.mark.anyio


def fetch(url: str, timeout: float = 30.0) -> str:
    return f"{url} within {timeout}"


def charge(account: str, version: int = 0, tags: list[str] | None = None) -> str:
    return f"{account} v{version} {tags}"


def echo(**kwargs: Any) -> dict[str, Any]:
    return kwargs


async def test_keywords_named_like_options_reach_the_step(make_app, uid):
    app = make_app()

    @app.register
    async def flow(ctx: Context) -> list[Any]:
        return [
            await ctx.run(fetch, "u", timeout=5),
            await ctx.run(charge, "acct", version=2, tags=["vip"]),
            await ctx.run(echo, retry=1, non_retryable=2, target=3, id=4, options=5),
        ]

    async with app:
        result = await asyncio.wait_for(app.run(f"{uid}-kw", flow).result(), 20)
    assert result == [
        "u within 5",
        "acct v2 ['vip']",
        {"retry": 1, "non_retryable": 2, "target": 3, "id": 4, "options": 5},
    ]


async def test_an_execution_may_take_a_parameter_named_id(make_app, uid):
    app = make_app()

    @app.register
    async def lookup(ctx: Context, id: int, target: str) -> str:
        return f"{id}@{target}"

    async with app:
        assert (
            await asyncio.wait_for(app.run(f"{uid}-id", lookup, id=42, target="t").result(), 20)
            == "42@t"
        )
        handle = app.rpc(f"{uid}-rpc", lookup, 7, target="x")
        assert await asyncio.wait_for(handle.result(), 20) == "7@x"


async def test_options_apply_through_options(make_app, uid):
    app = make_app()
    calls: list[int] = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionError("not yet")
        return "ok"

    @app.register
    async def flow(ctx: Context) -> str:
        return await ctx.options(retry=Linear(step=0.01), timeout=60).run(flaky)

    async with app:
        handle = app.options(timeout=timedelta(hours=1), tags={"team": "ops"}).run(f"{uid}-o", flow)
        assert await asyncio.wait_for(handle.result(), 20) == "ok"
        root = await app.promises.get(f"{uid}-o")
        step = await app.promises.get(f"{uid}-o:0")
    assert len(calls) == 3
    assert root.tags["team"] == "ops" and root.tags["troth:deadline"] == "option"
    assert step.tags["troth:deadline"] == "option"
    assert 59_000 <= step.record.timeout_at - step.record.created_at <= 60_000
