"""Several servers on one database: races that must have exactly one winner, deadlocks
that must be retried, retries that run out, and NOTIFY between servers.

"Servers" are ``PostgresService`` instances with pools of their own; each request runs in
a worker thread of its service, so the transactions really overlap in PostgreSQL.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import psycopg
import pytest

from troth.engine.store import Task
from troth.protocol.envelope import VERSION, Request, decode_request
from troth.protocol.records import PromiseRecord, PromiseState, TaskState, Value
from troth.storage.postgres import PostgresService, PostgresStore, migrate
from troth.storage.postgres.connection import connect
from troth.storage.postgres.locks import Namespace, key
from troth.storage.postgres.transaction import attempt
from troth.storage.service import Retriable

pytestmark = pytest.mark.pg

TARGET = "poll://any@workers"
LISTENER = "poll://uni@watchers/1"
R = 5000


def request(kind: str, data: dict[str, Any]) -> Request:
    body = {"kind": kind, "head": {"corrId": "c", "version": VERSION}, "data": data}
    return decode_request(msgspec.json.encode(body))


def create(id: str, timeout_at: int = 100_000, **tags: str) -> Request:
    return request("promise.create", {"id": id, "timeoutAt": timeout_at, "tags": tags})


def targeted(id: str, timeout_at: int = 100_000) -> Request:
    return create(id, timeout_at, **{"resonate:target": TARGET})


def settle(id: str, data: str) -> Request:
    return request("promise.settle", {"id": id, "state": "resolved", "value": {"data": data}})


def acquire(id: str, version: int, pid: str) -> Request:
    return request("task.acquire", {"id": id, "version": version, "pid": pid, "ttl": 60_000})


def listen(id: str) -> Request:
    return request("promise.register_listener", {"awaited": id, "address": LISTENER})


def callback(awaited: str, awaiter: str) -> Request:
    return request("promise.register_callback", {"awaited": awaited, "awaiter": awaiter})


def run(scenario: Callable[..., Awaitable[None]], url: str, services: int = 2) -> None:
    async def main() -> None:
        opened = [PostgresService(url, retry_timeout=R, pool_size=8) for _ in range(services)]
        try:
            await scenario(*opened)
        finally:
            for service in opened:
                await service.close()

    asyncio.run(main())


async def ok(service: PostgresService, req: Request, now: int = 0) -> Any:
    reply = await service.handle(req, now)
    assert reply.status == 200, (req.kind, reply)
    return reply.body


async def spread(
    a: PostgresService, b: PostgresService, requests: list[Request], now: int = 0
) -> list[Any]:
    """Send every request at once, alternating between the two servers."""
    return await asyncio.gather(
        *(((a, b)[i % 2]).handle(req, now) for i, req in enumerate(requests))
    )


def test_many_acquirers_of_one_task_exactly_one_wins_each_version(url: str) -> None:
    async def scenario(a: PostgresService, b: PostgresService) -> None:
        await ok(a, targeted("job"))
        for version in range(5):
            replies = await spread(a, b, [acquire("job", version, f"w{i}") for i in range(24)])
            winners = [r for r in replies if r.status == 200]
            assert len(winners) == 1, [r.status for r in replies]
            assert {r.status for r in replies if r.status != 200} == {409}
            task = winners[0].body.task
            assert (task.state, task.version) == (TaskState.ACQUIRED, version + 1)
            release = {"id": "job", "version": version + 1}
            await ok(a, request("task.release", release))

    run(scenario, url)


def test_concurrent_creates_of_one_id_keep_the_first(url: str) -> None:
    async def scenario(a: PostgresService, b: PostgresService) -> None:
        with connect(url) as holder:
            # Another server's create of the id is in flight (and will fail): every create
            # below finds no row and must not overwrite whichever of them commits first.
            hold(holder, "same")
            holder.execute(
                "INSERT INTO promises (id, state, param, value, tags, timeout_at, created_at)"
                " VALUES ('same', 'pending', '{}', '{}', '{}', 10, 0)"
            )
            creates = [create("same", 100_000, n=str(i)) for i in range(16)]
            sent = asyncio.ensure_future(spread(a, b, creates))
            await asyncio.sleep(0.5)
            holder.execute("ROLLBACK")
            replies = await sent
        records = {msgspec.json.encode(r.body.promise) for r in replies}
        assert {r.status for r in replies} == {200} and len(records) == 1
        snap = await a.snapshot()
        assert len(snap.promises) == 1 and msgspec.json.encode(snap.promises[0]) in records

    run(scenario, url)


def test_concurrent_settles_of_one_promise_one_wins(url: str) -> None:
    async def scenario(a: PostgresService, b: PostgresService) -> None:
        await ok(a, create("p"))
        await ok(a, listen("p"))
        replies = await spread(a, b, [settle("p", f"v{i}") for i in range(24)])
        assert {r.status for r in replies} == {200}
        values = {r.body.promise.value.data for r in replies}
        assert len(values) == 1, values
        [unblock] = await a.undelivered(10)
        assert unblock.message.data.promise.value.data in values

    run(scenario, url)


def test_suspending_on_a_promise_that_settles_meanwhile_never_loses_the_wake_up(
    url: str,
) -> None:
    async def scenario(a: PostgresService, b: PostgresService) -> None:
        for i in range(20):
            task, awaited = f"o{i}", f"o{i}:child"
            create_task = {
                "pid": "w",
                "ttl": 60_000,
                "action": {
                    "kind": "promise.create",
                    "head": {},
                    "data": {"id": task, "timeoutAt": 100_000, "tags": {"resonate:target": TARGET}},
                },
            }
            await ok(a, request("task.create", create_task))
            await ok(a, create(awaited))
            suspend = request(
                "task.suspend",
                {
                    "id": task,
                    "version": 1,
                    "actions": [
                        {
                            "kind": "promise.register_callback",
                            "head": {},
                            "data": {"awaited": awaited, "awaiter": task},
                        }
                    ],
                },
            )
            suspended, settled = await asyncio.gather(
                a.handle(suspend, 0), b.handle(settle(awaited, "x"), 0)
            )
            assert settled.status == 200 and suspended.status in (200, 300)
            state = (await ok(a, request("task.get", {"id": task}))).task
            # Suspended in time: the settlement woke it. Too late: it is still running.
            expected = TaskState.PENDING if suspended.status == 200 else TaskState.ACQUIRED
            assert state.state == expected, (suspended.status, state)

    run(scenario, url)


def test_two_servers_sweeping_the_same_timeouts_fire_each_once(url: str) -> None:
    async def scenario(a: PostgresService, b: PostgresService) -> None:
        timers = [create(f"t{i}", 100, **{"resonate:timer": "true"}) for i in range(200)]
        await spread(a, b, timers)
        await spread(a, b, [listen(f"t{i}") for i in range(200)])
        await spread(a, b, [targeted(f"j{i}") for i in range(100)])
        for delivery in await a.undelivered(1000):
            await a.ack([delivery])
        fired = await asyncio.gather(a.fire_due(R), b.fire_due(R))
        assert sum(fired) == 200 + 100  # every timer's deadline, every task's first retry
        snap = await a.snapshot()
        timer_states = {p.state for p in snap.promises if p.id.startswith("t")}
        assert timer_states == {PromiseState.RESOLVED}
        assert len(snap.messages) == 300  # one unblock per timer, one execute per task
        assert {t.timeout for t in snap.task_timeouts} == {2 * R}
        assert await a.fire_due(R) == await b.fire_due(R) == 0

    run(scenario, url)


def test_locks_taken_in_opposite_orders_deadlock_and_are_retried(url: str) -> None:
    async def scenario(a: PostgresService, b: PostgresService) -> None:
        pairs = [(f"d{i}", f"d{i}:x") for i in range(4)]
        await spread(a, b, [targeted(id) for pair in pairs for id in pair])
        before = await deadlocks(url)
        with connect(url) as holder:
            # Hold every object, so each request below waits for its first lock; released
            # together, each takes its first lock and then waits for its partner's.
            holder.execute("BEGIN")
            for pair in pairs:
                for id in pair:
                    holder.execute(
                        "SELECT pg_advisory_xact_lock(%s)", (key(Namespace.PROMISE, id),)
                    )
            requests = [callback(x, y) for x, y in pairs] + [callback(y, x) for x, y in pairs]
            sent = asyncio.ensure_future(spread(a, b, requests))
            await asyncio.sleep(0.5)
            holder.execute("ROLLBACK")
            replies = await sent
        assert {r.status for r in replies} == {200}
        snap = await a.snapshot()
        assert len(snap.callbacks) == 2 * len(pairs)
        assert await deadlocks(url, more_than=before) >= before + len(pairs)

    run(scenario, url)


def hold(conn: psycopg.Connection, *ids: str) -> None:
    """Open a transaction on ``conn`` that takes the object locks of ``ids``, as a request
    on another server would; it lasts until the caller ends it."""
    conn.execute("BEGIN")
    for id in ids:
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (key(Namespace.PROMISE, id),))


async def deadlocks(url: str, more_than: int | None = None) -> int:
    """The database's deadlock count; with ``more_than``, wait (a little) for it to pass
    that, since backends report their statistics lazily."""
    deadline = time.monotonic() + 5
    while True:
        with connect(url) as conn:
            conn.execute("SELECT pg_stat_clear_snapshot()")
            [count] = conn.execute(
                "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()"
            ).fetchone()
        if more_than is None or count > more_than or time.monotonic() > deadline:
            return count
        await asyncio.sleep(0.1)


def test_a_request_that_keeps_losing_raises_retriable_and_commits_nothing(url: str) -> None:
    async def scenario() -> None:
        service = PostgresService(url, retry_timeout=R, retries=2, lock_timeout_ms=50)
        await ok(service, create("p"))
        before = await service.snapshot()
        with connect(url) as holder:
            # Another server's transaction holds both objects and does not finish.
            hold(holder, "p", "q")
            started = time.monotonic()
            with pytest.raises(Retriable):
                await service.handle(settle("p", "late"), 0)
            with pytest.raises(Retriable):
                await service.handle(targeted("q"), 0)
            assert time.monotonic() - started < 5
            assert await service.snapshot() == before
            holder.execute("ROLLBACK")
        assert (await ok(service, settle("p", "now"))).promise.value.data == "now"
        await service.close()

    asyncio.run(scenario())


def test_a_notify_from_another_server_wakes_outbox_changed(url: str) -> None:
    async def scenario(a: PostgresService, b: PostgresService) -> None:
        changed = b.outbox_changed()
        await asyncio.wait_for(changed.wait(), 5)  # reported once the listener listens
        changed.clear()
        await ok(a, create("quiet"))
        await asyncio.sleep(0.5)
        assert not changed.is_set()
        await ok(a, targeted("loud"))
        await asyncio.wait_for(changed.wait(), 5)
        [delivery] = await b.undelivered(10)
        assert delivery.message.data.task.id == "loud"

    run(scenario, url)


def test_tasks_written_through_the_store_read_back_unchanged(url: str) -> None:
    """The codec round trip on PostgreSQL types (json text, bigint, C-collated text)."""
    task = Task("τ.1", TaskState.ACQUIRED, 7, ttl=2**53 - 1, pid="w", resumes=("a", "b"))

    def write(store: PostgresStore) -> None:
        store.set_promise(
            PromiseRecord(
                task.id,
                PromiseState.PENDING,
                param=Value(headers={"k": "\u0000"}, data="x"),
                value=Value(),
                tags={"z": "1", "a": "2"},
                timeout_at=10,
                created_at=0,
            )
        )
        store.set_task(task)

    with connect(url) as conn:
        migrate(conn)
        attempt(conn, write, R, write=True)
        read, _ = attempt(conn, lambda store: store.get_task(task.id), R, write=False)
        promise, _ = attempt(conn, lambda store: store.get_promise(task.id), R, write=False)
    assert read == task
    assert promise.param.headers == {"k": "\u0000"} and list(promise.tags) == ["z", "a"]
