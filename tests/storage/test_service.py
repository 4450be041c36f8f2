"""Every storage backend's service: isolation of a failing request, durability across
reopening, the outbox, the timeouts sweep, reset, and ids it cannot store."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import pytest
from msgspec.structs import replace

from tests.support.storage import (
    TARGET,
    Backend,
    create,
    get,
    listen,
    promise,
    targeted,
    task_create_breaking_a_check,
    timer,
)
from troth.engine import Task, TaskTimeoutKind
from troth.protocol.records import PromiseState, Schedule, TaskState, Value
from troth.protocol.responses import Reply
from troth.storage.sql.store import SqlStore

R = 5000
TIMER = {"resonate:timer": "true"}


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(coro)


def test_a_failing_request_is_rolled_back_alone(backend: Backend) -> None:
    async def scenario() -> None:
        service = backend.service()
        requests = [targeted(f"a{i}") for i in range(10)]
        requests += [task_create_breaking_a_check("bad")]
        requests += [targeted(f"b{i}") for i in range(10)]
        outcomes = await backend.together(service, requests)
        failures = [o for o in outcomes if not isinstance(o, Reply)]
        assert len(failures) == 1 and isinstance(outcomes[10], backend.check_violation)
        snap = await service.snapshot()
        ids = {p.id for p in snap.promises}
        assert len(ids) == 20 and "bad" not in ids
        assert "bad" not in {t.id for t in snap.promise_timeouts}
        assert (await service.handle(get("bad"), 0)).status == 404
        await service.close()

    run(scenario())


def test_everything_acknowledged_is_there_after_reopening(backend: Backend) -> None:
    async def write() -> Any:
        service = backend.service()
        await service.handle(targeted("p"), 0)
        await service.handle(timer("q", 100_000), 0)
        await service.handle(listen("q", "poll://uni@g/1"), 1)
        snap = await service.snapshot()
        await service.close()
        return snap

    async def reopen() -> Any:
        service = backend.service()
        snap = await service.snapshot()
        await service.close()
        return snap

    before = run(write())
    assert run(reopen()) == before
    assert len(before.listeners) == 1 and len(before.promise_timeouts) == 2


def test_acknowledging_a_superseded_delivery_keeps_the_newer_message(backend: Backend) -> None:
    async def scenario() -> None:
        service = backend.service(retry_timeout=R)
        await service.handle(targeted("p"), 0)
        [first] = await service.undelivered(10)
        await service.fire_due(R)  # the retry re-enqueues the execute under the same key
        [second] = await service.undelivered(10)
        assert second.seq > first.seq and second.message == first.message
        await service.ack([first])
        assert await service.undelivered(10) == [second]
        await service.ack([second])
        assert await service.undelivered(10) == []
        await service.close()

    run(scenario())


def test_outbox_is_read_oldest_first_and_limited(backend: Backend) -> None:
    async def scenario() -> None:
        service = backend.service()
        for id in ("c", "a", "b"):
            await service.handle(targeted(id), 0)
        deliveries = await service.undelivered(2)
        assert [d.message.data.task.id for d in deliveries] == ["c", "a"]
        assert {d.address for d in deliveries} == {TARGET}
        await service.close()

    run(scenario())


def test_outbox_changed_is_set_by_local_commits_that_enqueue(backend: Backend) -> None:
    async def scenario() -> None:
        service = backend.service()
        await backend.listening(service)
        changed = service.outbox_changed()
        await service.handle(create("quiet"), 0)
        await asyncio.sleep(0.3)
        assert not changed.is_set()
        await service.handle(targeted("loud"), 0)
        assert changed.is_set()
        await service.close()

    run(scenario())


def test_due_timeouts_fire_earliest_first(backend: Backend) -> None:
    async def scenario() -> None:
        service = backend.service()
        await service.handle(timer("late", 200), 0)
        await service.handle(timer("early", 100), 0)
        for id in ("late", "early"):
            await service.handle(listen(id, "poll://uni@g/1"), 0)
        assert await service.next_deadline() == 100
        assert await service.fire_due(99) == 0
        assert await service.fire_due(300) == 2
        unblocked = [d.message.data.promise.id for d in await service.undelivered(10)]
        assert unblocked == ["early", "late"]
        assert await service.next_deadline() is None
        await service.close()

    run(scenario())


def test_ties_fire_promise_then_retry_then_lease_then_schedule_then_by_id(
    backend: Backend,
) -> None:
    def arrange(store: SqlStore[Any]) -> None:
        for id in ("a", "b", "c", "d"):
            store.set_promise(promise(id))
        store.set_task(Task("b", TaskState.ACQUIRED, 1, ttl=5, pid="w"))
        store.set_task(Task("c", TaskState.PENDING, 0))
        store.set_schedule_timeout("a", 10)
        store.set_task_timeout("b", TaskTimeoutKind.LEASE, 10)
        store.set_task_timeout("c", TaskTimeoutKind.RETRY, 10)
        store.set_promise_timeout("d", 10)
        store.set_promise_timeout("c", 10)
        store.set_promise_timeout("a", 11)

    def drain(store: SqlStore[Any]) -> list[tuple[int, str, str]]:
        order = []
        while (timeout := store.next_timeout()) is not None:
            order.append((timeout.at, timeout.kind.name, timeout.id))
            store.disarm(timeout)
        return order

    backend.transact(arrange)
    assert backend.transact(drain) == [
        (10, "PROMISE", "c"),
        (10, "PROMISE", "d"),
        (10, "TASK_RETRY", "c"),
        (10, "TASK_LEASE", "b"),
        (10, "SCHEDULE", "a"),
        (11, "PROMISE", "a"),
    ]


def test_a_stale_timeout_is_dropped_once_fired(backend: Backend) -> None:
    def arrange(store: SqlStore[Any]) -> None:
        store.set_promise(promise("done", PromiseState.RESOLVED))
        store.set_promise_timeout("done", 10)

    backend.transact(arrange)

    async def scenario() -> None:
        service = backend.service()
        before = await service.snapshot()
        assert await service.fire_due(10) == 1
        after = await service.snapshot()
        assert after.promise_timeouts == [] and after.promises == before.promises
        assert await service.fire_due(10) == 0
        await service.close()

    run(scenario())


def test_a_failing_transition_raises_after_the_ones_before_it_commit(backend: Backend) -> None:
    def arrange(store: SqlStore[Any]) -> None:
        for id in ("t1", "t2"):
            store.set_promise(replace(promise(id), tags=TIMER))
            store.set_promise_timeout(id, 10)
        # A cron the doors would refuse: firing it raises.
        store.set_schedule(Schedule("bad", "not cron", "p", 1, Value(), {}, 0, 10))
        store.set_schedule_timeout("bad", 10)
        store.set_promise(replace(promise("t3"), tags=TIMER))
        store.set_promise_timeout("t3", 11)

    backend.transact(arrange)

    async def scenario() -> None:
        service = backend.service()
        with pytest.raises(ValueError):
            await service.fire_due(20)
        states = {p.id: p.state for p in (await service.snapshot()).promises}
        assert states == {"t1": "resolved", "t2": "resolved", "t3": "pending"}
        await service.close()

    run(scenario())


def test_reset_empties_everything_but_never_reuses_a_seq(backend: Backend) -> None:
    async def scenario() -> None:
        service = backend.service()
        await service.handle(targeted("p"), 0)
        [old] = await service.undelivered(10)
        await service.reset()
        snap = await service.snapshot()
        assert snap.promises == snap.tasks == snap.messages == snap.task_timeouts == []
        await service.handle(targeted("p"), 0)
        [new] = await service.undelivered(10)
        assert new.seq > old.seq
        await service.ack([old])
        assert await service.undelivered(10) == [new]
        assert await service.ping()
        await service.close()

    run(scenario())


def test_an_id_with_a_nul_is_simply_not_found(backend: Backend) -> None:
    """PostgreSQL text cannot hold NUL, so no stored id there contains one."""

    async def scenario() -> None:
        service = backend.service()
        assert (await service.handle(get("nul\x00id"), 0)).status == 404
        await service.close()

    run(scenario())


def test_a_non_positive_retry_timeout_is_refused(backend: Backend) -> None:
    with pytest.raises(ValueError):
        backend.service(retry_timeout=0)
