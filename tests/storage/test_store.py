"""Every backend's store effects as the engine relies on them: order, keys, and the scrub."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.storage import Backend
from troth.engine import Task, TaskTimeoutKind
from troth.protocol.messages import execute_message, unblock_message
from troth.protocol.records import PromiseRecord, PromiseState, TaskState, Value
from troth.storage.sql.store import SqlStore

Store = SqlStore[Any]


@pytest.fixture
def store(backend: Backend) -> Iterator[Store]:
    with backend.store() as store:
        yield store


def pending(id: str, **tags: str) -> PromiseRecord:
    return PromiseRecord(id, PromiseState.PENDING, Value(), Value(), tags, 1000, 0)


def outbox(store: Store) -> list[tuple[int, str, str]]:
    return store.conn.execute("SELECT seq, kind, address FROM outbox ORDER BY seq").fetchall()


def test_records_round_trip(store: Store) -> None:
    promise = PromiseRecord(
        "p", PromiseState.RESOLVED, Value({"h": "1"}, "x"), Value(data=""), {"k": "v"}, 9, 2, 5
    )
    store.set_promise(promise)
    assert store.get_promise("p") == promise
    task = Task("p", TaskState.ACQUIRED, 3, ttl=10, pid="w", resumes=("a", "b"))
    store.set_task(task)
    assert store.get_task("p") == task
    assert store.get_promise("q") is None and store.get_task("q") is None


def test_callbacks_keep_registration_order_through_scrubs(store: Store) -> None:
    for id in ("a", "w1", "w2", "w3", "x"):
        store.set_promise(pending(id))
    for awaiter in ("w2", "w1", "w3", "w1"):
        store.add_callback("a", awaiter)
    store.add_callback("x", "w1")
    assert store.callbacks("a") == ["w2", "w1", "w3"]
    store.scrub("w1")
    assert store.callbacks("a") == ["w2", "w3"] and store.callbacks("x") == []
    store.add_callback("a", "w1")
    assert store.callbacks("a") == ["w2", "w3", "w1"]


def test_the_scrub_leaves_settled_promises_alone(store: Store) -> None:
    # Unreachable through the handlers (a settlement empties the ledger first), but the
    # scrub is defined on pending promises only, and the store follows the definition.
    for id in ("a", "w"):
        store.set_promise(pending(id))
    store.add_callback("a", "w")
    store.set_promise(PromiseRecord("a", PromiseState.RESOLVED, Value(), Value(), {}, 1000, 0, 1))
    store.scrub("w")
    assert store.callbacks("a") == ["w"]


def test_listeners_keep_order_and_clear_with_callbacks(store: Store) -> None:
    for id in ("a", "w"):
        store.set_promise(pending(id))
    for address in ("poll://uni@g/2", "poll://uni@g/1", "poll://uni@g/2"):
        store.add_listener("a", address)
    store.add_callback("a", "w")
    assert store.listeners("a") == ["poll://uni@g/2", "poll://uni@g/1"]
    store.clear_registrations("a")
    assert store.listeners("a") == [] and store.callbacks("a") == []


def test_an_execute_replaces_the_older_execute_of_its_task_whatever_the_address(
    store: Store,
) -> None:
    store.set_message("poll://any@g1", execute_message("t", 0))
    [(first, _, _)] = outbox(store)
    store.set_message("poll://any@g2", execute_message("t", 1))
    store.set_message("poll://any@g1", execute_message("u", 0))
    rows = outbox(store)
    assert [(kind, address) for _, kind, address in rows] == [
        ("execute", "poll://any@g2"),
        ("execute", "poll://any@g1"),
    ]
    # The replacement drew a fresh seq, after the replaced one and before the next message.
    assert first < rows[0][0] < rows[1][0] and store.enqueued


def test_unblocks_are_keyed_by_promise_and_address(store: Store) -> None:
    p = pending("p")
    for address in ("poll://uni@g/1", "poll://uni@g/2", "poll://uni@g/1"):
        store.set_message(address, unblock_message(p))
    store.set_message("poll://uni@g/1", execute_message("p", 0))  # another key entirely
    assert [(kind, address) for _, kind, address in outbox(store)] == [
        ("unblock", "poll://uni@g/2"),
        ("unblock", "poll://uni@g/1"),
        ("execute", "poll://uni@g/1"),
    ]


def test_task_timeouts_are_keyed_by_id_and_kind(store: Store) -> None:
    store.set_promise(pending("t"))
    store.set_task(Task("t", TaskState.PENDING, 0))
    store.set_task_timeout("t", TaskTimeoutKind.RETRY, 50)
    store.set_task_timeout("t", TaskTimeoutKind.LEASE, 70)
    store.set_task_timeout("t", TaskTimeoutKind.RETRY, 60)
    rows = store.conn.execute("SELECT kind, at FROM task_timeouts ORDER BY kind").fetchall()
    assert rows == [(0, 60), (1, 70)]
    store.del_task_timeout("t")
    assert store.next_timeout() is None


def test_settled_in_branch_lists_settled_records_by_id(store: Store) -> None:
    settled = PromiseState.REJECTED
    for id, state in (("b:2", settled), ("b:1", settled), ("b", settled), ("b:3", None)):
        record = pending(id, **{"resonate:branch": "b"})
        if state is not None:
            record = PromiseRecord(id, state, Value(), Value(), record.tags, 1000, 0, 1)
        store.set_promise(record)
    assert [p.id for p in store.settled_in_branch("b", excluding="b")] == ["b:1", "b:2"]
