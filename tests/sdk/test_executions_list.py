"""``app.executions.list(...)``: the operators' executions list from the SDK, embedded and
against ``troth serve``, filtered and paged as ``troth executions list`` is."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from troth import Context, Troth

pytestmark = pytest.mark.anyio


def at(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


async def test_the_list_filters_by_function_state_and_time_and_pages(
    make_app: Callable[..., Troth], uid: str
) -> None:
    app = make_app()

    @app.register
    async def ok(ctx: Context, n: int) -> int:
        return n

    @app.register
    async def fails(ctx: Context) -> None:
        raise ValueError("no")

    async with app:
        before = at(app.clock.now()) - timedelta(seconds=1)  # virtual time when embedded
        for n in range(5):
            await app.run(f"{uid}-ok-{n}", ok, n).result()
        with pytest.raises(ValueError):
            await app.run(f"{uid}-fails", fails).result()
        page = await app.executions.list(function=ok, limit=2)
        ids = [e.id for e in page.executions]
        while page.next is not None:
            page = await app.executions.list(function="ok", limit=2, cursor=page.next)
            ids += [e.id for e in page.executions]
        rejected = await app.executions.list(state="rejected", since=before)
        future = await app.executions.list(since=at(app.clock.now()) + timedelta(hours=1))
        with pytest.raises(ValueError, match="state"):
            await app.executions.list(state="sleeping")
        with pytest.raises(ValueError, match="time zone"):
            await app.executions.list(since=datetime.now())
    mine = [id for id in ids if id.startswith(uid)]
    assert mine == [f"{uid}-ok-{n}" for n in reversed(range(5))]  # newest first, all pages
    assert [e.id for e in rejected.executions if e.id.startswith(uid)] == [f"{uid}-fails"]
    assert future.executions == [] and future.next is None
