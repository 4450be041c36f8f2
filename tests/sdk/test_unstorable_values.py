"""Values that cannot be stored fail loudly and once: a typed, non-retryable
``UnstorableValueError`` naming the type or the size, the same limit in both modes."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter

import pytest

from troth.sdk import Context, Troth, UnstorableValueError

pytestmark = pytest.mark.anyio

CALLS: Counter[str] = Counter()


class Conn:
    """A live resource: no JSON form."""


def open_conn() -> Conn:
    CALLS["open_conn"] += 1
    return Conn()


def big_report(size: int) -> str:
    CALLS["big_report"] += 1
    return "x" * size


@pytest.fixture(autouse=True)
def fresh_calls() -> None:
    CALLS.clear()


async def run(app: Troth, id: str, fn, *args):
    async with app:
        return await asyncio.wait_for(app.run(id, fn, *args).result(), 30)


async def test_a_step_result_the_codec_cannot_encode_rejects_the_step_once(make_app, uid):
    app = make_app()

    @app.register
    async def flow(ctx: Context) -> str:
        try:
            await ctx.run(open_conn)
        except UnstorableValueError as e:
            return str(e)
        return "stored"

    message = await run(app, f"{uid}-conn", flow)
    # Before, the step "succeeded" and the caller received {'__type': 'error', ...} as value.
    assert "cannot record a value of type Conn" in message
    assert CALLS["open_conn"] == 1  # not retried, though plain steps retry by default


async def test_a_step_result_over_the_payload_limit_rejects_the_step_once(make_app, uid):
    app = make_app()

    @app.register
    async def flow(ctx: Context) -> str:
        try:
            await ctx.run(big_report, 2 * 1024 * 1024)
        except UnstorableValueError as e:
            return str(e)
        return "stored"

    message = await run(app, f"{uid}-big", flow)
    # Before, server mode released and re-ran the step for ever (413 seen as "unreachable").
    assert "over the payload limit of 1048576 bytes" in message
    assert CALLS["big_report"] == 1


async def test_the_limit_is_configurable_and_applies_to_results_of_executions(make_app, uid):
    app = make_app(max_value_bytes=1000)

    @app.register
    async def flow(ctx: Context) -> str:
        return await ctx.run(big_report, 600)  # 600 chars encode to 808 base64 bytes

    @app.register
    async def bigger(ctx: Context) -> str:
        return "y" * 2000

    async with app:
        assert await app.run(f"{uid}-ok", flow).result() == "x" * 600
        with pytest.raises(UnstorableValueError, match="over the payload limit of 1000 bytes"):
            await app.run(f"{uid}-root", bigger).result()


async def test_an_execution_returning_an_unencodable_value_is_rejected(make_app, uid):
    app = make_app()

    @app.register
    async def leaky(ctx: Context) -> Conn:
        return Conn()

    with pytest.raises(UnstorableValueError, match="type Conn"):
        await run(app, f"{uid}-leaky", leaky)


async def test_arguments_over_the_limit_fail_at_the_call(make_app, uid):
    app = make_app(max_value_bytes=1000)

    @app.register
    async def callee(ctx: Context, text: str) -> int:
        return len(text)

    @app.register
    async def caller(ctx: Context) -> str:
        try:
            ctx.rpc(callee, "z" * 5000)
        except UnstorableValueError as e:
            return f"refused: {e}"
        return "sent"

    assert (await run(app, f"{uid}-args", caller)).startswith("refused: a value of type dict")


@pytest.mark.slow  # a troth serve process
async def test_a_server_with_a_lower_limit_rejects_the_step_once(start_server, uid):
    """The SDK's limit above the server's: the server's 413 rejects the step, once."""
    server = start_server("--max-body-bytes", "200000")
    app = Troth(url=server.url, group=f"g{uuid.uuid4().hex[:6]}")

    @app.register
    async def flow(ctx: Context) -> str:
        try:
            await ctx.run(big_report, 300_000)
        except UnstorableValueError as e:
            return str(e)
        return "stored"

    message = await run(app, f"{uid}-413", flow)
    assert "413" in message and "too large" in message
    assert CALLS["big_report"] == 1


async def test_an_error_over_a_tiny_limit_is_still_recorded_in_short(make_app, uid):
    """An error must always be recordable, or its execution could never be settled."""
    app = make_app(max_value_bytes=200)

    @app.register
    async def failing(ctx: Context) -> str:
        raise ValueError("x" * 5000)

    with pytest.raises(UnstorableValueError, match=r"ValueError: xxx.*recorded in short"):
        await run(app, f"{uid}-tiny", failing)
