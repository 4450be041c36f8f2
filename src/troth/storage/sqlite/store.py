"""``SqliteStore``: the engine's effects as SQL over one connection.

The store does not begin or end transactions; whoever holds the connection does (the
``Writer`` for writes, a reader for reads). Every statement touches rows by key or by
an index prefix, so each effect costs O(rows it affects).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Generator
from typing import Any, TypeVar

from troth.engine.store import (
    OutboxKey,
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

T = TypeVar("T")

_UPSERT_PROMISE = f"""
INSERT INTO promises ({PROMISE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET
    state = excluded.state, param = excluded.param, value = excluded.value,
    tags = excluded.tags, timeout_at = excluded.timeout_at,
    created_at = excluded.created_at, settled_at = excluded.settled_at
"""

_UPSERT_TASK = f"""
INSERT INTO tasks ({TASK_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET
    state = excluded.state, version = excluded.version, ttl = excluded.ttl,
    pid = excluded.pid, resumes = excluded.resumes
"""

_UPSERT_SCHEDULE = f"""
INSERT INTO schedules ({SCHEDULE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET
    cron = excluded.cron, promise_id = excluded.promise_id,
    promise_timeout = excluded.promise_timeout, promise_param = excluded.promise_param,
    promise_tags = excluded.promise_tags, created_at = excluded.created_at,
    next_run_at = excluded.next_run_at, last_run_at = excluded.last_run_at
"""

# Append at the end of the awaited promise's list unless already registered. The WHERE
# clause makes ``ON CONFLICT`` parse as an upsert rather than a join constraint.
_ADD_CALLBACK = """
INSERT INTO callbacks (awaited, awaiter, position)
SELECT ?1, ?2, coalesce(max(position), 0) + 1 FROM callbacks WHERE awaited = ?1
ON CONFLICT DO NOTHING
"""

_ADD_LISTENER = """
INSERT INTO listeners (awaited, address, position)
SELECT ?1, ?2, coalesce(max(position), 0) + 1 FROM listeners WHERE awaited = ?1
ON CONFLICT DO NOTHING
"""

# Correlated per callback row (not ``IN (SELECT ... pending)``), so the cost is the
# settled promise's own registrations, not the number of pending promises.
_SCRUB = """
DELETE FROM callbacks
WHERE awaiter = ?
  AND EXISTS (SELECT 1 FROM promises p WHERE p.id = callbacks.awaited AND p.state = 'pending')
"""

# Which table and key columns hold each kind of timeout.
_TIMEOUT_WHERE: dict[TimeoutKind, tuple[str, str, tuple[int, ...]]] = {
    TimeoutKind.PROMISE: ("promise_timeouts", "id = ?", ()),
    TimeoutKind.TASK_RETRY: ("task_timeouts", "id = ? AND kind = ?", (TaskTimeoutKind.RETRY,)),
    TimeoutKind.TASK_LEASE: ("task_timeouts", "id = ? AND kind = ?", (TaskTimeoutKind.LEASE,)),
    TimeoutKind.SCHEDULE: ("schedule_timeouts", "id = ?", ()),
}


class SqliteStore:
    """The ``troth.engine.Store`` effects on an open SQLite connection."""

    def __init__(self, conn: sqlite3.Connection, retry_timeout: int) -> None:
        self.conn = conn
        self.retry_timeout = retry_timeout
        # Set when a message is enqueued, so the owner can wake the delivery loop.
        self.enqueued = False

    def _one(self, sql: str, *args: object) -> tuple | None:
        return self.conn.execute(sql, args).fetchone()

    # -- promises ---------------------------------------------------------------------------

    def get_promise(self, id: str) -> PromiseRecord | None:
        row = self._one(f"SELECT {PROMISE_COLUMNS} FROM promises WHERE id = ?", id)
        return None if row is None else codec.promise(row)

    def set_promise(self, promise: PromiseRecord) -> None:
        self.conn.execute(_UPSERT_PROMISE, codec.promise_row(promise))

    def callbacks(self, id: str) -> list[str]:
        rows = self.conn.execute(
            "SELECT awaiter FROM callbacks WHERE awaited = ? ORDER BY position", (id,)
        )
        return [awaiter for (awaiter,) in rows]

    def listeners(self, id: str) -> list[str]:
        rows = self.conn.execute(
            "SELECT address FROM listeners WHERE awaited = ? ORDER BY position", (id,)
        )
        return [address for (address,) in rows]

    def add_callback(self, awaited: str, awaiter: str) -> None:
        self.conn.execute(_ADD_CALLBACK, (awaited, awaiter))

    def add_listener(self, awaited: str, address: str) -> None:
        self.conn.execute(_ADD_LISTENER, (awaited, address))

    def clear_registrations(self, id: str) -> None:
        self.conn.execute("DELETE FROM callbacks WHERE awaited = ?", (id,))
        self.conn.execute("DELETE FROM listeners WHERE awaited = ?", (id,))

    def scrub(self, settled: str) -> None:
        self.conn.execute(_SCRUB, (settled,))

    # -- tasks and schedules ----------------------------------------------------------------

    def get_task(self, id: str) -> Task | None:
        row = self._one(f"SELECT {TASK_COLUMNS} FROM tasks WHERE id = ?", id)
        return None if row is None else codec.task(row)

    def set_task(self, task: Task) -> None:
        self.conn.execute(_UPSERT_TASK, codec.task_row(task))

    def get_schedule(self, id: str) -> Schedule | None:
        row = self._one(f"SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE id = ?", id)
        return None if row is None else codec.schedule(row)

    def set_schedule(self, schedule: Schedule) -> None:
        self.conn.execute(_UPSERT_SCHEDULE, codec.schedule_row(schedule))

    def del_schedule(self, id: str) -> None:
        self.conn.execute("DELETE FROM schedules WHERE id = ?", (id,))

    # -- timeouts ---------------------------------------------------------------------------

    def set_promise_timeout(self, id: str, at: int) -> None:
        self.conn.execute(
            "INSERT INTO promise_timeouts (id, at) VALUES (?, ?)"
            " ON CONFLICT (id) DO UPDATE SET at = excluded.at",
            (id, at),
        )

    def del_promise_timeout(self, id: str) -> None:
        self.conn.execute("DELETE FROM promise_timeouts WHERE id = ?", (id,))

    def set_task_timeout(self, id: str, kind: TaskTimeoutKind, at: int) -> None:
        self.conn.execute(
            "INSERT INTO task_timeouts (id, kind, at) VALUES (?, ?, ?)"
            " ON CONFLICT (id, kind) DO UPDATE SET at = excluded.at",
            (id, int(kind), at),
        )

    def del_task_timeout(self, id: str) -> None:
        self.conn.execute("DELETE FROM task_timeouts WHERE id = ?", (id,))

    def set_schedule_timeout(self, id: str, at: int) -> None:
        self.conn.execute(
            "INSERT INTO schedule_timeouts (id, at) VALUES (?, ?)"
            " ON CONFLICT (id) DO UPDATE SET at = excluded.at",
            (id, at),
        )

    def del_schedule_timeout(self, id: str) -> None:
        self.conn.execute("DELETE FROM schedule_timeouts WHERE id = ?", (id,))

    def next_timeout(self) -> Timeout | None:
        """The head of each deadline index, then the earliest of the three."""
        heads: list[Timeout] = []
        row = self._one("SELECT at, id FROM promise_timeouts ORDER BY at, id LIMIT 1")
        if row is not None:
            heads.append(Timeout(row[0], TimeoutKind.PROMISE, row[1]))
        row = self._one("SELECT at, kind, id FROM task_timeouts ORDER BY at, kind, id LIMIT 1")
        if row is not None:
            heads.append(Timeout(row[0], task_timeout(TaskTimeoutKind(row[1])), row[2]))
        row = self._one("SELECT at, id FROM schedule_timeouts ORDER BY at, id LIMIT 1")
        if row is not None:
            heads.append(Timeout(row[0], TimeoutKind.SCHEDULE, row[1]))
        return min(heads, default=None)

    def is_armed(self, timeout: Timeout) -> bool:
        table, where, extra = _TIMEOUT_WHERE[timeout.kind]
        row = self._one(
            f"SELECT 1 FROM {table} WHERE {where} AND at = ?", timeout.id, *extra, timeout.at
        )
        return row is not None

    def disarm(self, timeout: Timeout) -> None:
        table, where, extra = _TIMEOUT_WHERE[timeout.kind]
        self.conn.execute(f"DELETE FROM {table} WHERE {where}", (timeout.id, *extra))

    # -- outbox -----------------------------------------------------------------------------

    def set_message(self, address: str, message: Message) -> None:
        # REPLACE deletes the superseded row and inserts anew, so the row gets a new seq.
        key: OutboxKey = outbox_key(address, message)
        self.conn.execute(
            "INSERT OR REPLACE INTO outbox (key, kind, address, message) VALUES (?, ?, ?, ?)",
            (codec.text(key), message.kind, address, codec.text(message)),
        )
        self.enqueued = True

    # -- queries of the extensions ----------------------------------------------------------

    def search_promises(
        self, state: PromiseState | None, tags: dict[str, str], after: str | None, limit: int
    ) -> Generator[PromiseRecord, None, None]:
        where, args = _tag_filter("tags", tags)
        if ORIGIN in tags:
            # Lets the planner walk the origin index (the CLI's tree view pages this way).
            where.append("origin = ?")
            args.append(tags[ORIGIN])
        if state is not None:
            where.append("state = ?")
            args.append(state.value)
        _after(where, args, after)
        sql = f"SELECT {PROMISE_COLUMNS} FROM promises {_where(where)} ORDER BY id LIMIT ?"
        return self._stream(sql, (*args, limit), codec.promise)

    def search_tasks(
        self, state: TaskState | None, after: str | None, limit: int
    ) -> Generator[Task, None, None]:
        where: list[str] = []
        args: list[object] = []
        if state is not None:
            where.append("state = ?")
            args.append(state.value)
        _after(where, args, after)
        sql = f"SELECT {TASK_COLUMNS} FROM tasks {_where(where)} ORDER BY id LIMIT ?"
        return self._stream(sql, (*args, limit), codec.task)

    def search_schedules(
        self, tags: dict[str, str], after: str | None, limit: int
    ) -> Generator[Schedule, None, None]:
        where, args = _tag_filter("promise_tags", tags)
        _after(where, args, after)
        sql = f"SELECT {SCHEDULE_COLUMNS} FROM schedules {_where(where)} ORDER BY id LIMIT ?"
        return self._stream(sql, (*args, limit), codec.schedule)

    def _stream(
        self, sql: str, args: tuple[object, ...], decode: Callable[[Any], T]
    ) -> Generator[T, None, None]:
        """The rows of a query, decoded, stepped one at a time; closing the generator
        finalizes the statement, so the rows never taken are never read."""
        cursor = self.conn.execute(sql, args)
        try:
            for row in cursor:
                yield decode(row)
        finally:
            cursor.close()

    def settled_in_branch(self, branch: str, excluding: str) -> list[PromiseRecord]:
        rows = self.conn.execute(
            f"SELECT {PROMISE_COLUMNS} FROM promises"
            " WHERE branch = ? AND id <> ? AND state <> 'pending' ORDER BY id",
            (branch, excluding),
        )
        return [codec.promise(row) for row in rows]


def _tag_filter(column: str, tags: dict[str, str]) -> tuple[list[str], list[object]]:
    """Containment: every pair must be present with an equal value."""
    where: list[str] = []
    args: list[object] = []
    for key, value in tags.items():
        where.append(f"EXISTS (SELECT 1 FROM json_each({column}) WHERE key = ? AND value = ?)")
        args += [key, value]
    return where, args


def _after(where: list[str], args: list[object], after: str | None) -> None:
    if after is not None:
        where.append("id > ?")
        args.append(after)


def _where(conditions: list[str]) -> str:
    return f"WHERE {' AND '.join(conditions)}" if conditions else ""
