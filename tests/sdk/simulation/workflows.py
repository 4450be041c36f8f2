"""The workflows every seed runs, and the ledger their steps write their effects to.

Each leaf step is an ``async def`` (no threads: a ``def`` step would run in a worker
thread and the run would stop being deterministic) that records ``start`` under its own
promise id when it begins, takes a random amount of virtual time, and records ``done``
(or ``fail``) when it finishes, so the ledger can be held against the server's record of
that promise. Durable functions record ``enter`` each time their body runs.

Together the workflows cover sequential steps, fan-out/fan-in with ``gather``, an rpc to
another function, a durable sleep, an external promise settled by the simulator, a step
that fails twice before it succeeds, a step that fails for good, and nested durable calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import random
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from troth.sdk import Context, Troth
from troth.sdk.retry import Constant

from .scheduler import OWNER, Scheduler


class Entry(NamedTuple):
    order: int  # position in the simulation's one total order of effects and settlements
    time: int
    worker: str
    event: str  # start | done | fail | enter
    key: str


@dataclass
class Effects:
    """The outside world the steps act on: the ledger, step durations, a flaky service."""

    sched: Scheduler
    rng: random.Random
    max_work_ms: int
    ledger: list[Entry] = field(default_factory=list)
    calls: Counter[str] = field(default_factory=Counter)

    def record(self, event: str, key: str) -> None:
        worker = OWNER.get() or "?"
        self.ledger.append(Entry(self.sched.order(), self.sched.now(), worker, event, key))
        self.sched.log(f"{worker} {event} {key}")


EFFECTS: contextvars.ContextVar[Effects] = contextvars.ContextVar("sim_effects")


@contextlib.asynccontextmanager
async def effect(key: str) -> AsyncIterator[Effects]:
    """One execution of a step: ``start``, some work, then ``done`` or ``fail``. A crash
    (cancellation) records nothing more: a dead process has no further effects."""
    effects = EFFECTS.get()
    effects.record("start", key)
    work = effects.rng.randint(0, effects.max_work_ms)
    if work:
        await effects.sched.sleep(work / 1000)
    try:
        yield effects
    except Exception:
        effects.record("fail", key)
        raise
    effects.record("done", key)


# -- leaf steps -------------------------------------------------------------------------------
# A leaf takes a ``Context`` only to know its own promise id (``ctx.id``), whatever the id
# scheme; it makes no durable calls, so it is a step like a plain function: recorded once,
# retried by its ``retry`` policy.


async def double(ctx: Context, n: int) -> int:
    async with effect(ctx.id):
        return 2 * n


async def flaky(ctx: Context, n: int) -> int:
    """A service that fails its first two calls, whichever worker makes them."""
    async with effect(ctx.id) as effects:
        effects.calls[ctx.id] += 1
        if effects.calls[ctx.id] <= 2:
            raise ConnectionError("service unavailable")
        return n + 1


async def doomed(ctx: Context) -> int:
    async with effect(ctx.id):
        raise ValueError("this step cannot succeed")


def entered(ctx: Context) -> None:
    EFFECTS.get().record("enter", ctx.id)


# -- workflows ----------------------------------------------------------------------------


async def sequential(ctx: Context, n: int) -> list[int]:
    entered(ctx)
    a = await ctx.run(double, n)
    b = await ctx.run(double, a)
    c = await ctx.run(double, b)
    return [a, b, c]


async def fan_out(ctx: Context, xs: list[int]) -> int:
    entered(ctx)
    return sum(await asyncio.gather(*(ctx.run(double, x) for x in xs)))


async def callee(ctx: Context, n: int) -> int:
    entered(ctx)
    return await ctx.run(double, n) + 1


async def caller(ctx: Context, n: int) -> int:
    entered(ctx)
    first, second = await asyncio.gather(ctx.rpc(callee, n), ctx.rpc(callee, n + 1))
    return await ctx.run(double, first + second)


async def sleeper(ctx: Context, n: int) -> int:
    entered(ctx)
    a = await ctx.run(double, n)
    await ctx.sleep(3)
    return await ctx.run(double, a)


async def approve(ctx: Context, n: int) -> str:
    entered(ctx)
    answer = ctx.promise(timeout=3600)  # the simulator settles it (see ``EXTERNAL``)
    a = await ctx.run(double, n)
    return f"{await answer}:{a}"


async def retrying(ctx: Context, n: int) -> str:
    entered(ctx)
    ok = await ctx.run(flaky, n, retry=Constant(0.5, max_attempts=4))
    try:
        await ctx.run(doomed, retry=Constant(0.3, max_attempts=3))
    except ValueError as e:
        return f"{ok} then {e}"
    return f"{ok} then no error"


async def innermost(ctx: Context, n: int) -> int:
    entered(ctx)
    return await ctx.run(double, n) + 1


async def inner(ctx: Context, n: int) -> int:
    entered(ctx)
    x = await ctx.run(double, n)
    return x + await ctx.run(innermost, x)


async def nested(ctx: Context, n: int) -> int:
    entered(ctx)
    a = await ctx.run(inner, n)
    return await ctx.run(double, a)


class Root(NamedTuple):
    id: str
    fn: Callable[..., Any]
    args: tuple[Any, ...]


ROOTS = [
    Root("seq", sequential, (1,)),
    Root("fan", fan_out, ([1, 2, 3],)),
    Root("rpc", caller, (5,)),
    Root("sleep", sleeper, (7,)),
    Root("approve", approve, (4,)),
    Root("retry", retrying, (10,)),
    Root("nested", nested, (2,)),
]

# The external promises the simulator settles — by the root that awaits one, the answer —
# and each root's value, worked out by hand (the uninterrupted run must agree before any
# seed is compared with it).
EXTERNAL = {"approve": "yes"}
EXPECTED = {
    "seq": [2, 4, 8],
    "fan": 12,
    "rpc": 2 * ((2 * 5 + 1) + (2 * 6 + 1)),
    "sleep": 28,
    "approve": "yes:8",
    "retry": "11 then this step cannot succeed",
    "nested": 2 * (4 + (2 * 4 + 1)),
}

FUNCTIONS = [
    sequential, fan_out, callee, caller, sleeper, approve, retrying, inner, innermost, nested,
    double, flaky, doomed,
]  # fmt: skip


def register(app: Troth) -> None:
    for fn in FUNCTIONS:
        app.register(fn)
