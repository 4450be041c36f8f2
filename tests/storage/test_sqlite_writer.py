"""SqliteService: group commit, isolation of a failing request, the read path, durability,
the outbox, and the timeouts sweep."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import pytest

from troth.engine import Task, TaskTimeoutKind
from troth.protocol.envelope import Request
from troth.protocol.records import PromiseRecord, PromiseState, TaskState, Value
from troth.protocol.requests import (
    CreateAction,
    PromiseCreateRequest,
    PromiseGetRequest,
    PromiseRegisterListenerRequest,
    TaskCreateRequest,
)
from troth.protocol.responses import Reply
from troth.storage.sqlite import SqliteService, SqliteStore, connect, migrate

TARGET = "poll://any@workers"
R = 5000


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(coro)


def create(id: str, timeout_at: int = 100_000) -> Request:
    return Request("promise.create", "c", PromiseCreateRequest(id, timeout_at, Value(), {}))


def timer(id: str, timeout_at: int) -> Request:
    tags = {"resonate:timer": "true"}
    return Request("promise.create", "c", PromiseCreateRequest(id, timeout_at, Value(), tags))


def targeted(id: str, timeout_at: int = 100_000) -> Request:
    return Request(
        "promise.create",
        "c",
        PromiseCreateRequest(id, timeout_at, Value(), {"resonate:target": TARGET}),
    )


def listen(id: str, address: str) -> Request:
    return Request("promise.register_listener", "c", PromiseRegisterListenerRequest(id, address))


def get(id: str) -> Request:
    return Request("promise.get", "c", PromiseGetRequest(id))


def task_create_breaking_a_check(id: str) -> Request:
    """A task.create the doors would refuse (ttl < 1): the promise and its timeout are
    written before the task row violates ``CHECK (ttl >= 0)``."""
    action = CreateAction(
        "promise.create",
        None,
        PromiseCreateRequest(id, 100_000, Value(), {"resonate:target": TARGET}),
    )
    return Request("task.create", "c", TaskCreateRequest("w", -1, action))


async def hold_writer(service: SqliteService) -> threading.Event:
    """Keep the writer busy until the returned event is set, so requests queue behind it:
    one write's commit waits in the commit thread behind a blocked job."""
    started, release = threading.Event(), threading.Event()

    def block() -> None:
        started.set()
        release.wait(10)

    service._writer.commit_thread.submit(block)
    assert started.wait(10)
    service._writer.submit(lambda store: None)
    await asyncio.sleep(0)  # its batch begins, and its commit queues behind ``block``
    return release


async def submitted(requests: list[Request], service: SqliteService) -> list[asyncio.Task]:
    tasks = [asyncio.ensure_future(service.handle(request, 0)) for request in requests]
    await asyncio.sleep(0)  # one loop turn: every handle() queues its job
    return tasks


def test_concurrent_requests_commit_together(tmp_path: Path) -> None:
    async def scenario() -> None:
        service = SqliteService(str(tmp_path / "t.db"))
        before = service.commits
        release = await hold_writer(service)
        tasks = await submitted([targeted(f"p{i}") for i in range(100)], service)
        release.set()
        replies = await asyncio.gather(*tasks)
        assert {reply.status for reply in replies} == {200}
        # One commit for the blocking job, one for all hundred requests.
        assert service.commits == before + 2
        snap = await service.snapshot()
        assert len(snap.promises) == len(snap.tasks) == len(snap.messages) == 100
        await service.close()

    run(scenario())


def test_many_concurrent_writers_all_commit_and_share_commits(tmp_path: Path) -> None:
    async def scenario() -> None:
        service = SqliteService(str(tmp_path / "t.db"))
        before = service.commits

        async def writer(k: int) -> None:
            for i in range(40):
                reply = await service.handle(targeted(f"w{k}.{i}"), 0)
                assert reply.status == 200

        await asyncio.gather(*(writer(k) for k in range(16)))
        assert service.commits - before < 16 * 40
        snap = await service.snapshot()
        assert len(snap.promises) == len(snap.tasks) == 16 * 40
        await service.close()

    run(scenario())


def test_a_failing_request_is_rolled_back_alone(tmp_path: Path) -> None:
    async def scenario() -> None:
        service = SqliteService(str(tmp_path / "t.db"))
        release = await hold_writer(service)
        requests = [targeted(f"a{i}") for i in range(10)]
        requests += [task_create_breaking_a_check("bad")]
        requests += [targeted(f"b{i}") for i in range(10)]
        tasks = await submitted(requests, service)
        release.set()
        outcomes = await asyncio.gather(*tasks, return_exceptions=True)
        failures = [o for o in outcomes if not isinstance(o, Reply)]
        assert len(failures) == 1 and isinstance(failures[0], sqlite3.IntegrityError)
        assert isinstance(outcomes[10], sqlite3.IntegrityError)
        snap = await service.snapshot()
        ids = {p.id for p in snap.promises}
        assert len(ids) == 20 and "bad" not in ids
        assert "bad" not in {t.id for t in snap.promise_timeouts}
        assert (await service.handle(get("bad"), 0)).status == 404
        await service.close()

    run(scenario())


def test_reads_do_not_wait_behind_writes(tmp_path: Path) -> None:
    async def scenario() -> None:
        service = SqliteService(str(tmp_path / "t.db"))
        await service.handle(create("p"), 0)
        release = await hold_writer(service)
        try:
            reply = await asyncio.wait_for(service.handle(get("p"), 0), timeout=5)
            assert reply.status == 200
            assert await asyncio.wait_for(service.snapshot(), timeout=5)
        finally:
            release.set()
        await service.close()

    run(scenario())


def test_everything_acknowledged_is_there_after_reopening(tmp_path: Path) -> None:
    path = str(tmp_path / "t.db")

    async def write() -> Any:
        service = SqliteService(path)
        await service.handle(targeted("p"), 0)
        await service.handle(timer("q", 100_000), 0)
        await service.handle(listen("q", "poll://uni@g/1"), 1)
        snap = await service.snapshot()
        await service.close()
        return snap

    async def reopen() -> Any:
        service = SqliteService(path)
        snap = await service.snapshot()
        await service.close()
        return snap

    before = run(write())
    assert run(reopen()) == before
    assert len(before.listeners) == 1 and len(before.promise_timeouts) == 2


def test_acknowledging_a_superseded_delivery_keeps_the_newer_message(tmp_path: Path) -> None:
    async def scenario() -> None:
        service = SqliteService(str(tmp_path / "t.db"), retry_timeout=R)
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


def test_outbox_is_read_oldest_first_and_limited(tmp_path: Path) -> None:
    async def scenario() -> None:
        service = SqliteService(str(tmp_path / "t.db"))
        for id in ("c", "a", "b"):
            await service.handle(targeted(id), 0)
        deliveries = await service.undelivered(2)
        assert [d.message.data.task.id for d in deliveries] == ["c", "a"]
        assert {d.address for d in deliveries} == {TARGET}
        await service.close()

    run(scenario())


def test_outbox_changed_is_set_by_commits_that_enqueue(tmp_path: Path) -> None:
    async def scenario() -> None:
        service = SqliteService(str(tmp_path / "t.db"))
        changed = service.outbox_changed()
        await service.handle(create("quiet"), 0)
        await asyncio.sleep(0.01)
        assert not changed.is_set()
        await service.handle(targeted("loud"), 0)
        assert changed.is_set()
        await service.close()

    run(scenario())


def test_due_timeouts_fire_earliest_first(tmp_path: Path) -> None:
    async def scenario() -> None:
        service = SqliteService(str(tmp_path / "t.db"))
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


def prepared(path: Path, arrange: Any) -> None:
    """Write state the handlers would not produce, straight through the store."""
    conn = connect(str(path))
    migrate(conn)
    conn.execute("BEGIN")
    arrange(SqliteStore(conn, R))
    conn.execute("COMMIT")
    conn.close()


def promise(id: str, state: PromiseState = PromiseState.PENDING) -> PromiseRecord:
    settled_at = None if state == PromiseState.PENDING else 1
    return PromiseRecord(id, state, Value(), Value(), {}, 10_000, 0, settled_at)


def test_ties_fire_promise_then_retry_then_lease_then_schedule_then_by_id(
    tmp_path: Path,
) -> None:
    def arrange(store: SqliteStore) -> None:
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

    prepared(tmp_path / "t.db", arrange)
    conn = connect(str(tmp_path / "t.db"))
    store = SqliteStore(conn, R)
    order = []
    while (timeout := store.next_timeout()) is not None:
        order.append((timeout.at, timeout.kind.name, timeout.id))
        store.disarm(timeout)
    assert order == [
        (10, "PROMISE", "c"),
        (10, "PROMISE", "d"),
        (10, "TASK_RETRY", "c"),
        (10, "TASK_LEASE", "b"),
        (10, "SCHEDULE", "a"),
        (11, "PROMISE", "a"),
    ]
    conn.close()


def test_a_stale_timeout_is_dropped_once_fired(tmp_path: Path) -> None:
    def arrange(store: SqliteStore) -> None:
        store.set_promise(promise("done", PromiseState.RESOLVED))
        store.set_promise_timeout("done", 10)

    prepared(tmp_path / "t.db", arrange)

    async def scenario() -> None:
        service = SqliteService(str(tmp_path / "t.db"))
        before = await service.snapshot()
        assert await service.fire_due(10) == 1
        after = await service.snapshot()
        assert after.promise_timeouts == [] and after.promises == before.promises
        assert await service.fire_due(10) == 0
        await service.close()

    run(scenario())


def test_reset_empties_everything_but_never_reuses_a_seq(tmp_path: Path) -> None:
    async def scenario() -> None:
        service = SqliteService(str(tmp_path / "t.db"))
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


def test_a_non_positive_retry_timeout_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        SqliteService(str(tmp_path / "t.db"), retry_timeout=0)
