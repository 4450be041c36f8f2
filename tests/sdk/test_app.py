"""The app's client surface: promises, schedules, handles, per-call options."""

from __future__ import annotations

import asyncio
import itertools
from datetime import timedelta

import pytest

from troth.protocol.records import PromiseState
from troth.sdk import AlreadySettledError, CanceledError, Context, FunctionNotFoundError
from troth.sdk.encryption import AesGcmEncryptor
from troth.testing import VirtualTroth

pytestmark = pytest.mark.anyio


async def test_promises_can_be_created_read_and_settled_from_outside():
    app = VirtualTroth()
    async with app:
        created = await app.promises.create("p1", timeout=timedelta(minutes=5), data={"q": 1})
        assert created.pending and created.param() == {"q": 1}
        resolved = await app.promises.resolve("p1", {"answer": 42})
        assert resolved.state == PromiseState.RESOLVED and resolved.value() == {"answer": 42}
        assert (await app.promises.get("p1")).value() == {"answer": 42}

        await app.promises.create("p2", timeout=60)
        rejected = await app.promises.reject("p2", ValueError("bad input"))
        with pytest.raises(ValueError, match="bad input"):
            rejected.value()

        await app.promises.create("p3", timeout=60)
        await app.promises.cancel("p3")
        with pytest.raises(CanceledError):
            await app.get("p3").result()


async def test_settling_a_settled_promise_another_way_raises_and_the_same_way_does_not():
    # Encrypted values are written anew each time: equal values, unequal encodings.
    app = VirtualTroth(encryptor=AesGcmEncryptor({"k": b"k" * 32}, "k"))
    async with app:
        await app.promises.create("p", timeout=60)
        await app.promises.resolve("p", {"answer": 42})
        again = await app.promises.resolve("p", {"answer": 42})  # idempotent
        assert again.value() == {"answer": 42}
        with pytest.raises(AlreadySettledError, match="already resolved with another value"):
            await app.promises.resolve("p", {"answer": 43})
        with pytest.raises(AlreadySettledError, match="already resolved; not rejected") as e:
            await app.promises.reject("p", ValueError("no"))
        assert (e.value.id, e.value.state, e.value.requested) == ("p", "resolved", "rejected")
        assert (await app.promises.get("p")).value() == {"answer": 42}


async def test_a_schedule_starts_an_execution_at_every_fire():
    app = VirtualTroth()
    runs: list[int] = []

    @app.register
    async def tick(ctx: Context, label: str) -> str:
        await ctx.run(runs.append, app.now())
        return label

    async with app:
        schedule = await app.schedules.create("every-minute", "* * * * *", tick, "hi")
        assert schedule.promise_id == "{{.id}}.{{.timestamp}}"
        for _ in range(100):
            if len(runs) >= 3:
                break
            await asyncio.sleep(0.01)
        assert len(runs) >= 3
        assert all(b - a == 60_000 for a, b in itertools.pairwise(runs))
        assert (await app.schedules.get("every-minute")).id == "every-minute"
        await app.schedules.delete("every-minute")


async def test_per_call_options_reach_the_child_promise():
    app = VirtualTroth()

    @app.register(name="work", version=3)
    async def work(ctx: Context) -> int:
        return 3

    @app.register
    async def flow(ctx: Context) -> list[str]:
        await ctx.options(version=3, timeout=timedelta(minutes=1), target="elsewhere").rpc("work")
        await ctx.options(id="flow:custom").run(str, 1)
        return ["ok"]

    async with app:
        assert await app.run("flow", flow).result() == ["ok"]
        child = await app.promises.get("flow:0")
        assert child.param() == {"func": "work", "args": [], "version": 3}
        assert child.tags["resonate:target"] == "poll://any@elsewhere"
        assert child.record.timeout_at - child.record.created_at == 60_000
        custom = await app.promises.get("flow:custom")
        assert custom.tags["resonate:parent"] == "flow"
        assert custom.tags["troth:step"] == "run:str"


async def test_running_a_function_that_is_not_registered_is_refused():
    app = VirtualTroth()

    async def stray(ctx: Context) -> None:
        return None

    async with app:
        with pytest.raises(FunctionNotFoundError, match="register it"):
            app.run("x", stray)
        with pytest.raises(FunctionNotFoundError):
            app.run("x", "nope")
