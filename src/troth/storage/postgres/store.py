"""``PostgresStore``: the engine's effects (``troth.storage.sql.store``) on a psycopg connection.

The store does not begin or end transactions; ``troth.storage.postgres.transaction`` does.
In a write transaction it follows the object-lock rule (``troth.storage.postgres.locks``):
the first read of a promise/task or a schedule takes the object's lock, and the rows are
read by statements issued after it, so nobody else changes them until commit.

Round trips matter more than statements here. The service runs the store in pipeline
mode: writes are queued and sent with the next read, and the first read of an object asks
for its lock, its promise and its task in one exchange. Rows read under their lock are
kept for the rest of the transaction (this transaction is their only writer), and so is
what this transaction knows of each timeout entry, so most requests cost two round trips:
one to read, one to write and commit.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any, TypeVar

import psycopg

from troth.engine.store import Queue, Task, Timeout, TimeoutKind
from troth.protocol.records import PromiseRecord, Schedule
from troth.storage import codec
from troth.storage.postgres import locks
from troth.storage.postgres.locks import Namespace
from troth.storage.sql.debounces import DebounceQueries
from troth.storage.sql.dialect import POSTGRES
from troth.storage.sql.queries import Queries
from troth.storage.sql.queues import QueueQueries
from troth.storage.sql.store import SqlStore

# A timeout entry as this transaction knows it: its deadline, or None when not armed.
_Entry = tuple[TimeoutKind, str]


T = TypeVar("T")

# The one search a transaction runs reads through this cursor, ``_FETCH`` rows at a time:
# few enough that rows of megabytes stay a small multiple of a page in memory.
_CURSOR = "troth_search"
_FETCH = 16


def _storable(id: str) -> bool:
    """PostgreSQL text cannot hold NUL, so no stored id contains one; such an id is simply
    not found rather than an error."""
    return "\x00" not in id


class PostgresStore(SqlStore[psycopg.Connection]):
    """The ``troth.engine.Store`` effects on an open psycopg connection.

    ``locking`` is True in write transactions (take object locks) and False in read-only
    ones, which see one snapshot and need none.
    """

    queries = Queries(POSTGRES)
    queue_queries = QueueQueries(POSTGRES)
    debounce_queries = DebounceQueries(POSTGRES)

    def __init__(self, conn: psycopg.Connection, retry_timeout: int, *, locking: bool) -> None:
        super().__init__(conn, retry_timeout)
        self.locking = locking
        # The earliest deadline armed by this transaction: the timeouts sweep looks again
        # when a transition armed something already due.
        self.earliest_armed: int | None = None
        self._locked: set[tuple[Namespace, str]] = set()
        self._promises: dict[str, PromiseRecord | None] = {}
        self._tasks: dict[str, Task | None] = {}
        self._schedules: dict[str, Schedule | None] = {}
        self._registrations: dict[str, tuple[list[str], list[str]]] = {}
        self._timeouts: dict[_Entry, int | None] = {}

    # -- locks and the object cache ---------------------------------------------------------

    def _lock(self, namespace: Namespace, id: str, *, wait: bool = True) -> psycopg.Cursor:
        """Queue the object lock of ``id``; the cursor answers whether it was granted."""
        statement = locks.LOCK if wait else locks.TRY_LOCK
        return self.conn.execute(statement, (locks.key(namespace, id),))

    def _load(self, id: str) -> None:
        """Read promise ``id`` and its task under the object lock, in one round trip."""
        if id in self._promises and id in self._tasks:
            return
        if not _storable(id):
            self._promises[id] = self._tasks[id] = None
            return
        self._take_lock(Namespace.PROMISE, id)
        promise, task = self._queue_object(id)
        self._keep_object(id, promise, task)

    def _queue_object(self, id: str) -> tuple[psycopg.Cursor, psycopg.Cursor]:
        promise = self.conn.execute(self.queries.get_promise, (id,))
        task = self.conn.execute(self.queries.get_task, (id,))
        return promise, task

    def _keep_object(self, id: str, promise: psycopg.Cursor, task: psycopg.Cursor) -> None:
        promise_row, task_row = promise.fetchone(), task.fetchone()
        self._promises[id] = None if promise_row is None else codec.promise(promise_row)
        self._tasks[id] = None if task_row is None else codec.task(task_row)

    def _take_lock(self, namespace: Namespace, id: str) -> None:
        """Queue the object lock unless held; a blind write takes it too, so the rule
        holds for every writer."""
        if self.locking and (namespace, id) not in self._locked:
            self._lock(namespace, id)
            self._locked.add((namespace, id))

    # -- promises and tasks: an object, read as one ---------------------------------------

    def get_promise(self, id: str) -> PromiseRecord | None:
        self._load(id)
        return self._promises[id]

    def get_task(self, id: str) -> Task | None:
        self._load(id)
        return self._tasks[id]

    def set_promise(self, promise: PromiseRecord) -> None:
        self._take_lock(Namespace.PROMISE, promise.id)
        super().set_promise(promise)
        self._promises[promise.id] = promise

    def set_task(self, task: Task) -> None:
        self._take_lock(Namespace.PROMISE, task.id)
        super().set_task(task)
        self._tasks[task.id] = task

    def _registered(self, id: str) -> tuple[list[str], list[str]]:
        """Promise ``id``'s callbacks and listeners, both in one round trip."""
        if id not in self._registrations:
            callbacks = self.conn.execute(self.queries.callbacks, (id,))
            listeners = self.conn.execute(self.queries.listeners, (id,))
            self._registrations[id] = (
                [awaiter for (awaiter,) in callbacks.fetchall()],
                [address for (address,) in listeners.fetchall()],
            )
        return self._registrations[id]

    def callbacks(self, id: str) -> list[str]:
        return list(self._registered(id)[0])

    def listeners(self, id: str) -> list[str]:
        return list(self._registered(id)[1])

    def add_callback(self, awaited: str, awaiter: str) -> None:
        super().add_callback(awaited, awaiter)
        self._registrations.pop(awaited, None)

    def add_listener(self, awaited: str, address: str) -> None:
        super().add_listener(awaited, address)
        self._registrations.pop(awaited, None)

    def clear_registrations(self, id: str) -> None:
        super().clear_registrations(id)
        self._registrations[id] = ([], [])

    def scrub(self, settled: str) -> None:
        super().scrub(settled)
        # Rows of other promises' lists went away; forget every list read so far.
        self._registrations.clear()

    # -- schedules --------------------------------------------------------------------------

    def get_queue(self, name: str) -> Queue | None:
        """Under the queue's lock: every queue effect of a transaction follows this read
        (``troth.engine.queues``), so the queue's counters, keys and line change under it."""
        if not _storable(name):
            return None
        self._take_lock(Namespace.QUEUE, name)
        return super().get_queue(name)

    def set_queue(self, queue: Queue) -> None:
        self._take_lock(Namespace.QUEUE, queue.spec.name)
        super().set_queue(queue)

    def get_schedule(self, id: str) -> Schedule | None:
        if id not in self._schedules:
            schedule = None
            if _storable(id):
                self._take_lock(Namespace.SCHEDULE, id)
                schedule = super().get_schedule(id)
            self._schedules[id] = schedule
        return self._schedules[id]

    def set_schedule(self, schedule: Schedule) -> None:
        self._take_lock(Namespace.SCHEDULE, schedule.id)
        super().set_schedule(schedule)
        self._schedules[schedule.id] = schedule

    def del_schedule(self, id: str) -> None:
        self._take_lock(Namespace.SCHEDULE, id)
        super().del_schedule(id)
        self._schedules[id] = None

    # -- timeouts ---------------------------------------------------------------------------

    def _arm(self, kind: TimeoutKind, id: str, at: int) -> None:
        super()._arm(kind, id, at)
        self._timeouts[(kind, id)] = at
        if self.earliest_armed is None or at < self.earliest_armed:
            self.earliest_armed = at

    def _disarm(self, kind: TimeoutKind, id: str) -> None:
        super()._disarm(kind, id)
        self._timeouts[(kind, id)] = None

    def del_task_timeout(self, id: str) -> None:
        super().del_task_timeout(id)
        self._timeouts[(TimeoutKind.TASK_RETRY, id)] = None
        self._timeouts[(TimeoutKind.TASK_LEASE, id)] = None

    def is_armed(self, timeout: Timeout) -> bool:
        known = self._timeouts.get((timeout.kind, timeout.id), ...)
        if known is not ...:
            return known == timeout.at
        return super().is_armed(timeout)

    def claim(self, timeout: Timeout, *, wait: bool) -> bool | None:
        """Take the lock of ``timeout``'s object for firing it: True when it is ours and
        still armed exactly so, False when it is gone (fired or changed by someone else),
        None when another transaction holds the object and ``wait`` is False.

        The object lock is the claim. Locking the timeout row first (``FOR UPDATE SKIP
        LOCKED``) and the object second would deadlock against requests, which lock the
        object first and then write its timeout rows; a try-lock skips a busy object
        without waiting, which is what SKIP LOCKED is for. Lock, armed check and the
        object's rows travel in one round trip.
        """
        schedule = timeout.kind is TimeoutKind.SCHEDULE
        namespace = Namespace.SCHEDULE if schedule else Namespace.PROMISE
        granted = self._lock(namespace, timeout.id, wait=wait)
        armed = self._armed_query(timeout)
        rows = self._queue_object(timeout.id) if namespace is Namespace.PROMISE else None
        if not wait:
            row = granted.fetchone()
            assert row is not None  # SELECT pg_try_advisory_xact_lock(...) answers one row
            if not row[0]:
                return None
        self._locked.add((namespace, timeout.id))
        if rows is not None:
            self._keep_object(timeout.id, *rows)
        if armed.fetchone() is None:
            return False
        self._timeouts[(timeout.kind, timeout.id)] = timeout.at
        return True

    # -- queries of the extensions ----------------------------------------------------------

    def _stream(
        self, query: str, args: tuple[Any, ...], decode: Callable[[Any], T]
    ) -> Generator[T, None, None]:
        """The rows fetched a few at a time through a cursor of the transaction: a
        client-side result would hold every row at once. The cursor ends with the
        transaction (which runs one search)."""
        if not all(_storable(arg) for arg in args if isinstance(arg, str)):
            return  # nothing stored can match a NUL
        self.conn.execute(f"DECLARE {_CURSOR} NO SCROLL CURSOR FOR {query}", args)
        while rows := self.conn.execute(f"FETCH {_FETCH} FROM {_CURSOR}").fetchall():
            for row in rows:
                yield decode(row)

    def _rows(self, query: str, args: tuple[Any, ...]) -> list[Any]:
        if not all(_storable(arg) for arg in args if isinstance(arg, str)):
            return []  # nothing stored can match a NUL
        return super()._rows(query, args)
