"""The workflows every seed runs, and the ledger their steps write their effects to.

Each leaf step is an ``async def`` (no threads: a ``def`` step would run in a worker
thread and the run would stop being deterministic) that records ``start`` under its own
promise id when it begins, takes a random amount of virtual time, and records ``done``
(or ``fail``) when it finishes, so the ledger can be held against the server's record of
that promise. Durable functions record ``enter`` each time their body runs.

Together the workflows cover sequential steps, fan-out/fan-in with ``gather``, an rpc to
another function, a durable sleep, an external promise settled by the simulator, a step
that fails twice before it succeeds, a step that fails for good, nested durable calls,
values that cannot be recorded (over the apps' payload limit, over the server's body
limit, of a type the codec cannot encode), and a function whose code changes for the
workers that boot after a crash or a stop (``deploy``: a redeploy meeting executions in
flight), executions canceled while they run or sleep (cleanup inside ``ctx.shield()``, an
rpc child canceled in turn), and a saga compensating two steps after a third one fails.

A ``done`` entry carries a digest of the value the step produced (``fail``, the error's
type), so that a recorded result can be traced back to a run that produced it.
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
from troth.sdk.errors import CanceledError, UnstorableValueError
from troth.sdk.replay import digest
from troth.sdk.retry import Constant, Never

from .scheduler import OWNER, Scheduler


class Entry(NamedTuple):
    order: int  # position in the simulation's one total order of effects and settlements
    time: int
    worker: str
    event: str  # start | done | fail | enter
    key: str
    # start: the function that ran; done: the digest of the value it produced; fail: the
    # error's type; enter: None
    value: str | None = None


@dataclass
class Effects:
    """The outside world the steps act on: the ledger, step durations, a flaky service."""

    sched: Scheduler
    rng: random.Random
    max_work_ms: int
    ledger: list[Entry] = field(default_factory=list)
    calls: Counter[str] = field(default_factory=Counter)

    def record(self, event: str, key: str, value: str | None = None) -> None:
        worker = OWNER.get() or "?"
        entry = Entry(self.sched.order(), self.sched.now(), worker, event, key, value)
        self.ledger.append(entry)
        self.sched.log(f"{worker} {event} {key}")


class Run:
    """One execution of a step, as ``effect`` hands it to the step's body."""

    def __init__(self, effects: Effects) -> None:
        self.effects = effects
        self.value: Any = None

    def produce(self, value: Any) -> Any:
        """The step's result: returned, and noted for the ``done`` entry."""
        self.value = value
        return value


EFFECTS: contextvars.ContextVar[Effects] = contextvars.ContextVar("sim_effects")


@contextlib.asynccontextmanager
async def effect(key: str, step: str) -> AsyncIterator[Run]:
    """One execution of the step function ``step`` under promise ``key``: ``start``, some
    work, then ``done`` (with the digest of the value the body ``produce``d) or ``fail``. A
    crash (cancellation) records nothing more: a dead process has no further effects."""
    effects = EFFECTS.get()
    effects.record("start", key, step)
    work = effects.rng.randint(0, effects.max_work_ms)
    if work:
        await effects.sched.sleep(work / 1000)
    run = Run(effects)
    try:
        yield run
    except Exception as e:
        effects.record("fail", key, type(e).__qualname__)
        raise
    effects.record("done", key, digest(run.value))


# -- leaf steps -------------------------------------------------------------------------------
# A leaf takes a ``Context`` only to know its own promise id (``ctx.id``), whatever the id
# scheme; it makes no durable calls, so it is a step like a plain function: recorded once,
# retried by its ``retry`` policy.


async def double(ctx: Context, n: int) -> int:
    async with effect(ctx.id, "double") as run:
        return run.produce(2 * n)


async def flaky(ctx: Context, n: int) -> int:
    """A service that fails its first two calls, whichever worker makes them."""
    async with effect(ctx.id, "flaky") as run:
        calls = run.effects.calls
        calls[ctx.id] += 1
        if calls[ctx.id] <= 2:
            raise ConnectionError("service unavailable")
        return run.produce(n + 1)


async def doomed(ctx: Context) -> int:
    async with effect(ctx.id, "doomed"):
        raise ValueError("this step cannot succeed")


async def charge(ctx: Context, n: int) -> int:
    """The side effect ``deploy`` makes at position 1 before the redeploy."""
    async with effect(ctx.id, "charge") as run:
        return run.produce(n + 100)


async def refund(ctx: Context, n: int) -> int:
    """What ``deploy`` calls at position 1 after the redeploy instead."""
    async with effect(ctx.id, "refund") as run:
        return run.produce(n - 100)


async def bulky(ctx: Context, size: int) -> str:
    """A result of ``size`` characters: over a payload limit, it cannot be recorded."""
    async with effect(ctx.id, "bulky") as run:
        return run.produce("x" * size)


class Conn:
    """Something a step may hold but no codec can record (a connection, a lock)."""


async def connect(ctx: Context) -> Conn:
    async with effect(ctx.id, "connect") as run:
        return run.produce(Conn())


def entered(ctx: Context) -> None:
    if isinstance(ctx, Context):  # not when ``checks`` replays the function from its records
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
    ok = await ctx.options(retry=Constant(0.5, max_attempts=4)).run(flaky, n)
    try:
        await ctx.options(retry=Constant(0.3, max_attempts=3)).run(doomed)
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


# The simulated apps record values of at most MAX_VALUE_BYTES (encoded); the simulated
# server refuses request bodies over BODY_LIMIT with a 413, as ``troth serve`` does. The
# server's limit is the lower one on purpose: a value between the two passes the app's
# codec and meets the 413 (a misconfiguration the SDK must survive).
MAX_VALUE_BYTES = 8000
BODY_LIMIT = 6000
OVER_SERVER = 5000  # characters: encoded 6668 bytes, under the app's limit, over the server's
OVER_APP = 8000  # characters: encoded 10668 bytes, over the app's limit


async def hoard(ctx: Context, n: int) -> int:
    """A step whose value the app refuses: the step and, unhandled, the execution are
    rejected with ``UnstorableValueError`` (and the step is not retried)."""
    entered(ctx)
    a = await ctx.run(double, n)
    await ctx.run(bulky, OVER_APP)
    return a


async def ship(ctx: Context, n: int) -> str:
    """A step whose value the server refuses (413), handled; then an rpc whose argument the
    app refuses, unhandled."""
    entered(ctx)
    note = "recorded"
    try:
        await ctx.run(bulky, OVER_SERVER)
    except UnstorableValueError as e:
        note = str(e)
    return await ctx.rpc(callee, note + "y" * OVER_APP)


async def unstorable(ctx: Context, n: int) -> str:
    """A step whose value has no encoding: rejected, and the workflow handles it."""
    entered(ctx)
    a = await ctx.run(double, n)
    try:
        await ctx.run(connect)
    except UnstorableValueError as e:
        return f"{a}: {e}"
    return f"{a}: recorded a connection"


async def deploy(ctx: Context, n: int) -> str:
    """Version one of ``deploy``; workers booted after a crash or a stop run ``redeployed``
    under the same name (see ``register``)."""
    entered(ctx)
    a = await ctx.run(double, n)
    b = await ctx.run(charge, a)
    await ctx.sleep(4)  # an execution in flight when the redeploy comes
    return f"charged {b}, {await ctx.run(double, b)}"


async def redeployed(ctx: Context, n: int) -> str:
    """``deploy`` after the redeploy: another step at position 1."""
    entered(ctx)
    a = await ctx.run(double, n)
    b = await ctx.run(refund, a)
    await ctx.sleep(4)
    return f"refunded {b}, {await ctx.run(double, b)}"


# -- cancellation and compensation ----------------------------------------------------------
# The simulator cancels ``csleep`` and ``cparent`` (see ``CANCELS``) once the promise named
# there exists, so that every seed ends as the uninterrupted run: canceled after the first
# step, each cleanup (and each compensation of ``saga``) recorded once.


async def undo(ctx: Context, what: str) -> str:
    async with effect(ctx.id, "undo") as run:
        return run.produce(f"undone {what}")


async def canceled_sleeper(ctx: Context, n: int) -> int:
    entered(ctx)
    a = await ctx.run(double, n)
    try:
        await ctx.sleep(600)
    except CanceledError:
        async with ctx.shield():
            await ctx.run(undo, f"sleep {a}")
        raise
    return a


async def sleeping_child(ctx: Context, n: int) -> int:
    entered(ctx)
    try:
        await ctx.sleep(600)
    except CanceledError:
        async with ctx.shield():
            await ctx.run(undo, f"child {n}")
            await ctx.run(double, n)
        raise
    return n


async def canceled_parent(ctx: Context, n: int) -> int:
    entered(ctx)
    try:
        return await ctx.rpc(sleeping_child, n)
    except CanceledError:
        async with ctx.shield():
            await ctx.run(undo, f"parent {n}")
        raise


async def compensating(ctx: Context, n: int) -> str:
    """Fails at its third step; the two before it are compensated, last first."""
    entered(ctx)
    async with ctx.saga() as saga:
        a = await ctx.run(double, n)
        saga.on_failure(undo, f"first {a}")
        b = await ctx.run(double, a)
        saga.options(retry=Constant(0.2, max_attempts=3)).on_failure(undo, f"second {b}")
        await ctx.options(retry=Never()).run(doomed)
    return "not compensated"


async def timed(ctx: Context, n: int) -> int:
    """Started with a deadline and a grace period (see ``ROOTS``): canceled by its timer with
    a ``TimedOutError`` reason while it sleeps, and cleans up before the deadline."""
    entered(ctx)
    a = await ctx.run(double, n)
    try:
        await ctx.sleep(600)
    except CanceledError:
        async with ctx.shield():
            await ctx.run(undo, f"timed {a}")
        raise
    return a


class Root(NamedTuple):
    id: str
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    options: dict[str, Any] = {}  # noqa: RUF012 (never mutated)


ROOTS = [
    Root("seq", sequential, (1,)),
    Root("fan", fan_out, ([1, 2, 3],)),
    Root("rpc", caller, (5,)),
    Root("sleep", sleeper, (7,)),
    Root("approve", approve, (4,)),
    Root("retry", retrying, (10,)),
    Root("nested", nested, (2,)),
    Root("hoard", hoard, (3,)),
    Root("ship", ship, (1,)),
    Root("unstorable", unstorable, (6,)),
    Root("deploy", deploy, (5,)),
    Root("csleep", canceled_sleeper, (3,)),
    Root("cparent", canceled_parent, (4,)),
    Root("saga", compensating, (5,)),
    Root("timed", timed, (2,), {"timeout": 400, "grace": 200}),
]

# The root whose code changes between runs: compared with the versions' own rules (see
# ``checks.deploy_problems``), not with the uninterrupted run.
CHANGED = "deploy"
VERSIONS = {"run:charge": deploy, "run:refund": redeployed}  # by the step at position 1

LEAVES = {double, flaky, doomed, charge, refund, bulky, connect, undo}

# The roots the simulator cancels, each once the promise given here exists, and the reason.
CANCELS = {"csleep": "csleep:0", "cparent": "cparent:0"}
CANCEL_REASON = "the customer left"

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
    "unstorable": "12: cannot record a value of type Conn: cannot encode a value of type Conn",
    "deploy": "charged 110, 220",
}
# ... and the roots rejected, with their error's type (the message names the size).
REJECTED = {
    "hoard": "UnstorableValueError",
    "ship": "UnstorableValueError",
    "saga": "ValueError",
}
# ... and the roots canceled, with the error they end with (``timed``'s names the instant
# of its deadline, which differs between seeds: only its start is compared).
CANCELED = {
    "timed": "promise 'timed' was canceled: promise 'timed' timed out at its deadline",
    "csleep": f"promise 'csleep' was canceled: {CANCEL_REASON}",
    "cparent": f"promise 'cparent:0' was canceled: {CANCEL_REASON}",
}

FUNCTIONS = [
    sequential, fan_out, callee, caller, sleeper, approve, retrying, inner, innermost, nested,
    hoard, ship, unstorable, double, flaky, doomed, charge, refund, bulky, connect,
    undo, canceled_sleeper, sleeping_child, canceled_parent, compensating, timed,
]  # fmt: skip


def register(app: Troth, redeployed_code: bool = False) -> None:
    """Register every function; ``redeployed_code``: ``deploy`` is the new code."""
    for fn in FUNCTIONS:
        app.register(fn)
    app.register(redeployed if redeployed_code else deploy, name="deploy")
