"""Starting is durable: once ``app.run``/``app.rpc`` has returned, the execution will exist
even if no one awaits its handle, because ``stop()`` (and leaving ``async with app``) waits
for every pending start; ``await handle.started()`` waits for one root promise."""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest

from troth.sdk import Context, Troth
from troth.sdk.errors import NetworkError

pytestmark = pytest.mark.anyio


def double(x: int) -> int:
    return 2 * x


async def doubler(ctx: Context, x: int) -> int:
    return await ctx.run(double, x)


async def test_executions_started_and_never_awaited_exist_after_the_app_exits(
    make_app: Callable[..., Troth], tmp_path: Path, uid: str, request: pytest.FixtureRequest
):
    embedded = request.node.callspec.params["make_app"] == "embedded"
    options = {"db": str(tmp_path / "troth.db")} if embedded else {}
    # A short lease: this test is about creation, not about how a stop hands tasks over.
    first = make_app(ttl=timedelta(seconds=2), **options)
    first.register(doubler)
    ids = [f"{uid}-{i}" for i in range(20)]
    async with first:
        for i, id in enumerate(ids):
            if i % 2:
                first.run(id, doubler, i)
            else:
                first.rpc(id, doubler, i)
    second = make_app(**options)
    second.register(doubler)
    async with second:
        for id in ids:
            assert (await second.promises.get(id)).id == id  # exists: promise.get answers 200
        results = [await second.get(id).result() for id in ids]
    assert results == [2 * i for i in range(20)]


async def test_started_returns_once_the_root_promise_exists(
    make_app: Callable[..., Troth], uid: str
):
    app = make_app()
    app.register(doubler)
    async with app:
        handle = app.rpc(f"{uid}-rpc", doubler, 5)
        await handle.started()
        assert (await app.promises.get(f"{uid}-rpc")).id == f"{uid}-rpc"
        run = app.run(f"{uid}-run", doubler, 6)
        await run.started()
        assert (await app.promises.get(f"{uid}-run")).id == f"{uid}-run"
        assert (await handle.result(), await run.result()) == (10, 12)
        await app.get(f"{uid}-run").started()  # nothing to create: returns at once


def dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


async def test_a_failed_start_is_raised_by_started_or_logged_as_an_error_at_stop(
    caplog: pytest.LogCaptureFixture,
):
    app = Troth(url=dead_url(), request_retry=timedelta(seconds=0.3))
    app.register(doubler)
    awaited = app.rpc("awaited", doubler, 1)
    app.rpc("forgotten", doubler, 2)
    with pytest.raises(NetworkError, match="ConnectionRefusedError"):
        await awaited.started()
    with caplog.at_level(logging.ERROR, logger="troth.sdk"):
        await app.stop()
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1  # the one no caller heard of; the awaited one was reported
    assert "'forgotten' was never created" in errors[0] and "ConnectionRefused" in errors[0]
