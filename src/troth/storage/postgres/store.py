"""``PostgresStore``: the engine's effects as SQL over one psycopg connection.

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

from troth.engine.store import (
    Task,
    TaskTimeoutKind,
    Timeout,
    TimeoutKind,
    outbox_key,
    task_timeout,
)
from troth.protocol.records import ORIGIN, PromiseRecord, PromiseState, Schedule, TaskState
from troth.protocol.responses import Message
from troth.storage import codec
from troth.storage.codec import PROMISE_COLUMNS, SCHEDULE_COLUMNS, TASK_COLUMNS
from troth.storage.postgres import locks
from troth.storage.postgres.locks import Namespace

_UPSERT_PROMISE = f"""
INSERT INTO promises ({PROMISE_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (id) DO UPDATE SET
    state = excluded.state, param = excluded.param, value = excluded.value,
    tags = excluded.tags, timeout_at = excluded.timeout_at,
    created_at = excluded.created_at, settled_at = excluded.settled_at
"""

_UPSERT_TASK = f"""
INSERT INTO tasks ({TASK_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s)
ON CONFLICT (id) DO UPDATE SET
    state = excluded.state, version = excluded.version, ttl = excluded.ttl,
    pid = excluded.pid, resumes = excluded.resumes
"""

_UPSERT_SCHEDULE = f"""
INSERT INTO schedules ({SCHEDULE_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (id) DO UPDATE SET
    cron = excluded.cron, promise_id = excluded.promise_id,
    promise_timeout = excluded.promise_timeout, promise_param = excluded.promise_param,
    promise_tags = excluded.promise_tags, created_at = excluded.created_at,
    next_run_at = excluded.next_run_at, last_run_at = excluded.last_run_at
"""

# Append at the end of the awaited promise's list unless already registered.
_ADD_CALLBACK = """
INSERT INTO callbacks (awaited, awaiter, position)
SELECT %(awaited)s, %(awaiter)s, coalesce(max(position), 0) + 1
FROM callbacks WHERE awaited = %(awaited)s
ON CONFLICT DO NOTHING
"""

_ADD_LISTENER = """
INSERT INTO listeners (awaited, address, position)
SELECT %(awaited)s, %(address)s, coalesce(max(position), 0) + 1
FROM listeners WHERE awaited = %(awaited)s
ON CONFLICT DO NOTHING
"""

# Driven by the awaiter index, so the cost is the settled promise's own registrations.
_SCRUB = """
DELETE FROM callbacks c USING promises p
WHERE c.awaiter = %s AND p.id = c.awaited AND p.state = 'pending'
"""

# A newer message for the same key replaces the row and draws a fresh seq.
_SET_MESSAGE = """
INSERT INTO outbox (key, kind, address, message) VALUES (%s, %s, %s, %s)
ON CONFLICT (key) DO UPDATE SET
    seq = nextval('outbox_seq'), kind = excluded.kind,
    address = excluded.address, message = excluded.message,
    claimed_by = NULL, claimed_until = NULL
"""

# The armed timeouts in firing order (deadline, kind, id), each table read along its
# deadline index; a task timeout's kind (0 retry, 1 lease) maps onto TimeoutKind by + 1.
_TIMEOUTS = """
(SELECT at, 0 AS kind, id FROM promise_timeouts WHERE at <= %(until)s
 ORDER BY at, id LIMIT %(limit)s)
UNION ALL
(SELECT at, kind + 1, id FROM task_timeouts WHERE at <= %(until)s
 ORDER BY at, kind, id LIMIT %(limit)s)
UNION ALL
(SELECT at, 3, id FROM schedule_timeouts WHERE at <= %(until)s
 ORDER BY at, id LIMIT %(limit)s)
ORDER BY at, kind, id LIMIT %(limit)s
"""

_NEVER = 2**63 - 1

# Which table and key columns hold each kind of timeout.
_TIMEOUT_WHERE: dict[TimeoutKind, tuple[str, str, tuple[int, ...]]] = {
    TimeoutKind.PROMISE: ("promise_timeouts", "id = %s", ()),
    TimeoutKind.TASK_RETRY: ("task_timeouts", "id = %s AND kind = %s", (TaskTimeoutKind.RETRY,)),
    TimeoutKind.TASK_LEASE: ("task_timeouts", "id = %s AND kind = %s", (TaskTimeoutKind.LEASE,)),
    TimeoutKind.SCHEDULE: ("schedule_timeouts", "id = %s", ()),
}

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


class PostgresStore:
    """The ``troth.engine.Store`` effects on an open psycopg connection.

    ``locking`` is True in write transactions (take object locks) and False in read-only
    ones, which see one snapshot and need none.
    """

    def __init__(self, conn: psycopg.Connection, retry_timeout: int, *, locking: bool) -> None:
        self.conn = conn
        self.retry_timeout = retry_timeout
        self.locking = locking
        # Set when a message is enqueued, so the owner sends NOTIFY and wakes delivery.
        self.enqueued = False
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
        promise = self.conn.execute(f"SELECT {PROMISE_COLUMNS} FROM promises WHERE id = %s", (id,))
        task = self.conn.execute(f"SELECT {TASK_COLUMNS} FROM tasks WHERE id = %s", (id,))
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

    # -- promises ---------------------------------------------------------------------------

    def get_promise(self, id: str) -> PromiseRecord | None:
        self._load(id)
        return self._promises[id]

    def set_promise(self, promise: PromiseRecord) -> None:
        self._take_lock(Namespace.PROMISE, promise.id)
        self.conn.execute(_UPSERT_PROMISE, codec.promise_row(promise))
        self._promises[promise.id] = promise

    def _registered(self, id: str) -> tuple[list[str], list[str]]:
        """Promise ``id``'s callbacks and listeners, both in one round trip."""
        if id not in self._registrations:
            callbacks = self.conn.execute(
                "SELECT awaiter FROM callbacks WHERE awaited = %s ORDER BY position", (id,)
            )
            listeners = self.conn.execute(
                "SELECT address FROM listeners WHERE awaited = %s ORDER BY position", (id,)
            )
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
        self.conn.execute(_ADD_CALLBACK, {"awaited": awaited, "awaiter": awaiter})
        self._registrations.pop(awaited, None)

    def add_listener(self, awaited: str, address: str) -> None:
        self.conn.execute(_ADD_LISTENER, {"awaited": awaited, "address": address})
        self._registrations.pop(awaited, None)

    def clear_registrations(self, id: str) -> None:
        self.conn.execute("DELETE FROM callbacks WHERE awaited = %s", (id,))
        self.conn.execute("DELETE FROM listeners WHERE awaited = %s", (id,))
        self._registrations[id] = ([], [])

    def scrub(self, settled: str) -> None:
        self.conn.execute(_SCRUB, (settled,))
        # Rows of other promises' lists went away; forget every list read so far.
        self._registrations.clear()

    # -- tasks and schedules ----------------------------------------------------------------

    def get_task(self, id: str) -> Task | None:
        self._load(id)
        return self._tasks[id]

    def set_task(self, task: Task) -> None:
        self._take_lock(Namespace.PROMISE, task.id)
        self.conn.execute(_UPSERT_TASK, codec.task_row(task))
        self._tasks[task.id] = task

    def get_schedule(self, id: str) -> Schedule | None:
        if id not in self._schedules:
            row = None
            if _storable(id):
                self._take_lock(Namespace.SCHEDULE, id)
                row = self.conn.execute(
                    f"SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE id = %s", (id,)
                ).fetchone()
            self._schedules[id] = None if row is None else codec.schedule(row)
        return self._schedules[id]

    def set_schedule(self, schedule: Schedule) -> None:
        self._take_lock(Namespace.SCHEDULE, schedule.id)
        self.conn.execute(_UPSERT_SCHEDULE, codec.schedule_row(schedule))
        self._schedules[schedule.id] = schedule

    def del_schedule(self, id: str) -> None:
        self._take_lock(Namespace.SCHEDULE, id)
        self.conn.execute("DELETE FROM schedules WHERE id = %s", (id,))
        self._schedules[id] = None

    # -- timeouts ---------------------------------------------------------------------------

    def _armed(self, kind: TimeoutKind, id: str, at: int) -> None:
        self._timeouts[(kind, id)] = at
        if self.earliest_armed is None or at < self.earliest_armed:
            self.earliest_armed = at

    def set_promise_timeout(self, id: str, at: int) -> None:
        self.conn.execute(
            "INSERT INTO promise_timeouts (id, at) VALUES (%s, %s)"
            " ON CONFLICT (id) DO UPDATE SET at = excluded.at",
            (id, at),
        )
        self._armed(TimeoutKind.PROMISE, id, at)

    def del_promise_timeout(self, id: str) -> None:
        self.conn.execute("DELETE FROM promise_timeouts WHERE id = %s", (id,))
        self._timeouts[(TimeoutKind.PROMISE, id)] = None

    def set_task_timeout(self, id: str, kind: TaskTimeoutKind, at: int) -> None:
        self.conn.execute(
            "INSERT INTO task_timeouts (id, kind, at) VALUES (%s, %s, %s)"
            " ON CONFLICT (id, kind) DO UPDATE SET at = excluded.at",
            (id, int(kind), at),
        )
        self._armed(task_timeout(kind), id, at)

    def del_task_timeout(self, id: str) -> None:
        self.conn.execute("DELETE FROM task_timeouts WHERE id = %s", (id,))
        self._timeouts[(TimeoutKind.TASK_RETRY, id)] = None
        self._timeouts[(TimeoutKind.TASK_LEASE, id)] = None

    def set_schedule_timeout(self, id: str, at: int) -> None:
        self.conn.execute(
            "INSERT INTO schedule_timeouts (id, at) VALUES (%s, %s)"
            " ON CONFLICT (id) DO UPDATE SET at = excluded.at",
            (id, at),
        )
        self._armed(TimeoutKind.SCHEDULE, id, at)

    def del_schedule_timeout(self, id: str) -> None:
        self.conn.execute("DELETE FROM schedule_timeouts WHERE id = %s", (id,))
        self._timeouts[(TimeoutKind.SCHEDULE, id)] = None

    def due(self, until: int, limit: int) -> list[Timeout]:
        """Up to ``limit`` armed timeouts with deadline <= ``until``, in firing order."""
        rows = self.conn.execute(_TIMEOUTS, {"until": until, "limit": limit}).fetchall()
        return [Timeout(at, TimeoutKind(kind), id) for at, kind, id in rows]

    def next_timeout(self) -> Timeout | None:
        heads = self.due(_NEVER, 1)
        return heads[0] if heads else None

    def _armed_query(self, timeout: Timeout) -> psycopg.Cursor:
        table, where, extra = _TIMEOUT_WHERE[timeout.kind]
        return self.conn.execute(
            f"SELECT 1 FROM {table} WHERE {where} AND at = %s", (timeout.id, *extra, timeout.at)
        )

    def is_armed(self, timeout: Timeout) -> bool:
        known = self._timeouts.get((timeout.kind, timeout.id), ...)
        if known is not ...:
            return known == timeout.at
        return self._armed_query(timeout).fetchone() is not None

    def disarm(self, timeout: Timeout) -> None:
        table, where, extra = _TIMEOUT_WHERE[timeout.kind]
        self.conn.execute(f"DELETE FROM {table} WHERE {where}", (timeout.id, *extra))
        self._timeouts[(timeout.kind, timeout.id)] = None

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

    # -- outbox -----------------------------------------------------------------------------

    def set_message(self, address: str, message: Message) -> None:
        key = outbox_key(address, message)
        self.conn.execute(
            _SET_MESSAGE, (codec.text(key), message.kind, address, codec.text(message))
        )
        self.enqueued = True

    # -- queries of the extensions ----------------------------------------------------------

    def search_promises(
        self, state: PromiseState | None, tags: dict[str, str], after: str | None, limit: int
    ) -> Generator[PromiseRecord, None, None]:
        where, args = _tag_filter("tags", tags)
        if ORIGIN in tags:
            # Lets the planner walk the origin index (the CLI's tree view pages this way).
            where.append("origin = %s")
            args.append(tags[ORIGIN])
        if state is not None:
            where.append("state = %s")
            args.append(state.value)
        _after(where, args, after)
        query = f"SELECT {PROMISE_COLUMNS} FROM promises {_where(where)} ORDER BY id LIMIT %s"
        return self._stream(query, (*args, limit), codec.promise)

    def search_tasks(
        self, state: TaskState | None, after: str | None, limit: int
    ) -> Generator[Task, None, None]:
        where: list[str] = []
        args: list[object] = []
        if state is not None:
            where.append("state = %s")
            args.append(state.value)
        _after(where, args, after)
        query = f"SELECT {TASK_COLUMNS} FROM tasks {_where(where)} ORDER BY id LIMIT %s"
        return self._stream(query, (*args, limit), codec.task)

    def search_schedules(
        self, tags: dict[str, str], after: str | None, limit: int
    ) -> Generator[Schedule, None, None]:
        where, args = _tag_filter("promise_tags", tags)
        _after(where, args, after)
        query = f"SELECT {SCHEDULE_COLUMNS} FROM schedules {_where(where)} ORDER BY id LIMIT %s"
        return self._stream(query, (*args, limit), codec.schedule)

    def settled_in_branch(self, branch: str, excluding: str) -> list[PromiseRecord]:
        rows = self._rows(
            f"SELECT {PROMISE_COLUMNS} FROM promises"
            " WHERE branch = %s AND id <> %s AND state <> 'pending' ORDER BY id",
            (branch, excluding),
        )
        return [codec.promise(row) for row in rows]

    def _stream(
        self, query: str, args: tuple[Any, ...], decode: Callable[[Any], T]
    ) -> Generator[T, None, None]:
        """The rows of a query, decoded, fetched a few at a time through a cursor of the
        transaction: a client-side result would hold every row at once, and a search's
        caller stops reading where its page is full. The cursor ends with the transaction
        (which runs one search)."""
        if not all(_storable(arg) for arg in args if isinstance(arg, str)):
            return  # nothing stored can match a NUL
        self.conn.execute(f"DECLARE {_CURSOR} NO SCROLL CURSOR FOR {query}", args)
        while rows := self.conn.execute(f"FETCH {_FETCH} FROM {_CURSOR}").fetchall():
            for row in rows:
                yield decode(row)

    def _rows(self, query: str, args: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        if not all(_storable(arg) for arg in args if isinstance(arg, str)):
            return []  # nothing stored can match a NUL
        return self.conn.execute(query, args).fetchall()


def _tag_filter(column: str, tags: dict[str, str]) -> tuple[list[str], list[object]]:
    """Containment: every pair must be present with an equal value."""
    where: list[str] = []
    args: list[object] = []
    for key, value in tags.items():
        where.append(f"{column} ->> %s = %s")
        args += [key, value]
    return where, args


def _after(where: list[str], args: list[object], after: str | None) -> None:
    if after is not None:
        where.append("id > %s")
        args.append(after)


def _where(conditions: list[str]) -> str:
    return f"WHERE {' AND '.join(conditions)}" if conditions else ""
