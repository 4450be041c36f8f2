"""Queues from the SDK (``app.queue``, docs/queues.md), embedded and against ``troth serve``:
the limits hold for what actually runs, checked from the start and end instants each run
records, and the queue's options reach the server as they were given."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import timedelta

import pytest

from troth import Context, Queue, RateLimit, Troth
from troth.protocol.kinds import Kind
from troth.protocol.queues import QueueGetRequest, QueueSpec, Rate
from troth.protocol.responses import Reply
from troth.sdk.errors import ServerError
from troth.sdk.queues import declare

pytestmark = pytest.mark.anyio

# (key, start, end) of every run of ``work``, in this process.
Runs = list[tuple[str, float, float]]


def most_at_once(runs: Runs, key: str | None = None) -> int:
    """The most runs (of ``key``, or of any key) that overlapped at one instant."""
    events = sorted(
        (instant, delta)
        for k, start, end in runs
        if key is None or k == key
        for instant, delta in ((start, 1), (end, -1))
    )
    most = now = 0
    for _, delta in events:  # an end sorts before a start at the same instant
        now += delta
        most = max(most, now)
    return most


def app_with_work(make_app: Callable[..., Troth], runs: Runs) -> Troth:
    app = make_app()

    async def hold(key: str) -> None:
        start = time.monotonic()
        await asyncio.sleep(0.05)  # holds its slot: a step is not a suspension
        runs.append((key, start, time.monotonic()))

    @app.register
    async def work(ctx: Context, key: str, n: int) -> int:
        await ctx.run(hold, key)
        return n * n

    return app


async def test_concurrency_and_key_concurrency_hold_for_what_runs(
    make_app: Callable[..., Troth], uid: str
) -> None:
    runs: Runs = []
    app = app_with_work(make_app, runs)
    queue = app.queue(f"{uid}-q", concurrency=2, key_concurrency=1)
    async with app:
        handles = [
            queue.options(key=f"k{n % 3}").run(f"{uid}-{n}", "work", f"k{n % 3}", n)
            for n in range(12)
        ]
        results = [await handle.result() for handle in handles]
    assert results == [n * n for n in range(12)]
    assert len(runs) == 12
    assert most_at_once(runs) == 2  # the limit, reached: the queue runs them in parallel
    assert all(most_at_once(runs, f"k{k}") == 1 for k in range(3))


async def test_executions_of_a_queue_started_by_rpc_and_from_a_workflow_are_limited(
    make_app: Callable[..., Troth], uid: str
) -> None:
    runs: Runs = []
    app = app_with_work(make_app, runs)
    name = f"{uid}-q"
    app.queue(name, concurrency=1)

    @app.register
    async def fan_out(ctx: Context, n: int) -> list[int]:
        calls = [ctx.options(queue=name, queue_key="k").rpc("work", "k", i) for i in range(n)]
        return [await call for call in calls]

    async with app:
        assert await app.rpc(f"{uid}-fan", fan_out, 4).result() == [0, 1, 4, 9]
    assert len(runs) == 4 and most_at_once(runs) == 1


async def test_a_parent_awaiting_its_child_in_the_same_key_does_not_deadlock(
    make_app: Callable[..., Troth], uid: str
) -> None:
    """A suspended execution gives its slot back (docs/queues.md): with one slot per key,
    the child of a parent in the same key runs while the parent awaits it."""
    app = make_app()
    name = f"{uid}-q"
    queue = app.queue(name, key_concurrency=1)

    @app.register
    async def child(ctx: Context, n: int) -> int:
        return n + 1

    @app.register
    async def parent(ctx: Context, n: int) -> int:
        return await ctx.options(queue=name, queue_key="k").rpc(child, n) * 2

    async with app:
        handle = queue.options(key="k").run(f"{uid}-parent", parent, 4)
        assert await asyncio.wait_for(handle.result(), 30) == 10


async def test_the_queue_is_declared_on_the_server_with_its_limits(
    make_app: Callable[..., Troth], uid: str
) -> None:
    app = make_app()
    name = f"{uid}-q"
    app.queue(
        name,
        concurrency=20,
        key_concurrency=2,
        rate=RateLimit(50, timedelta(seconds=30)),
        priority=True,
    )
    async with app:
        _, body = await app.runtime.network.call(Kind.QUEUE_GET, QueueGetRequest(name))
    spec = body.queue.spec
    assert (spec.concurrency, spec.key_concurrency, spec.priority) == (20, 2, True)
    assert spec.rate == Rate(50, 30_000) and spec.key_rate is None


async def test_debounced_starts_collapse_into_the_last_one(
    make_app: Callable[..., Troth], uid: str
) -> None:
    ran: list[int] = []
    app = make_app()

    def note(n: int) -> int:
        ran.append(n)
        return n * 10

    @app.register
    async def refresh(ctx: Context, n: int) -> int:
        return await ctx.run(note, n)

    queue = app.queue(f"{uid}-q", concurrency=4)
    async with app:
        window = queue.options(key="customer-7", debounce=timedelta(milliseconds=300))
        handles = []
        for n in range(4):  # one after the other: each start supersedes the one before
            handles.append(window.run(f"{uid}-{n}", refresh, n))
            await handles[-1].started()
        results = [await handle.result() for handle in handles]
    assert results == [30, 30, 30, 30]  # every handle has the last start's result
    assert ran == [3]


def test_bad_declarations_are_refused_naming_the_limit() -> None:
    app = Troth(db=":memory:")
    with pytest.raises(ValueError, match="concurrency"):
        app.queue("q", concurrency=0)
    with pytest.raises(ValueError, match="key_concurrency"):
        app.queue("q", key_concurrency=-1)
    with pytest.raises(ValueError, match="limit"):
        RateLimit(0, timedelta(seconds=1))
    with pytest.raises(ValueError, match="period"):
        RateLimit(1, timedelta(0))
    queue = app.queue("q", concurrency=1)
    with pytest.raises(ValueError, match="priority=True"):
        queue.options(priority=1)
    with pytest.raises(ValueError, match="debounce"):
        queue.options(debounce=timedelta(0))
    with pytest.raises(TypeError, match="need the queue option"):
        app.options(debounce=5)


async def test_a_step_cannot_be_queued(make_app: Callable[..., Troth], uid: str) -> None:
    app = make_app()
    app.queue(f"{uid}-q", concurrency=1)

    @app.register
    async def steps(ctx: Context) -> None:
        await ctx.options(queue=f"{uid}-q").run(time.monotonic)

    async with app:
        with pytest.raises(Exception, match="queue option is for executions"):
            await app.run(f"{uid}-s", steps).result()


class WithoutQueues:
    """What a server from before queues answers ``queue.set``: an unknown kind."""

    async def send(self, kind: Kind, data: object) -> Reply:
        return Reply(400, f"Unknown operation: {kind}")


async def test_a_server_without_queues_fails_the_start_saying_so() -> None:
    spec = QueueSpec("llm", concurrency=2)
    queues = {"llm": Queue(spec, Troth(db=":memory:").options)}
    with pytest.raises(ServerError, match="this server has no queues"):
        await declare(WithoutQueues(), queues)  # type: ignore[arg-type]
