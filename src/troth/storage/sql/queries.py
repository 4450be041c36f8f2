"""Every statement the SQL stores run, written once.

Each is written with ``?`` for a parameter and built for a dialect by ``Queries``; what
a dialect spells its own way (the outbox upsert, a tag test) comes from ``Dialect``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from troth.engine.store import TaskTimeoutKind, TimeoutKind
from troth.protocol.records import ORIGIN, PromiseState, TaskState
from troth.storage.codec import PROMISE_COLUMNS, SCHEDULE_COLUMNS, TASK_COLUMNS
from troth.storage.sql.dialect import Dialect

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

# Append at the end of the awaited promise's list unless already registered; the
# parameters are (awaited, awaiter or address, awaited). On SQLite the WHERE clause also
# makes ``ON CONFLICT`` parse as an upsert rather than a join constraint.
_ADD_REGISTRATION = """
INSERT INTO {table} (awaited, {column}, position)
SELECT ?, ?, coalesce(max(position), 0) + 1 FROM {table} WHERE awaited = ?
ON CONFLICT DO NOTHING
"""

# Correlated per callback row (not ``IN (SELECT ... pending)``) and driven by the awaiter
# index, so the cost is the settled promise's own registrations, not the number of
# pending promises.
_SCRUB = """
DELETE FROM callbacks
WHERE awaiter = ?
  AND EXISTS (SELECT 1 FROM promises p WHERE p.id = callbacks.awaited AND p.state = 'pending')
"""

# The armed timeouts in firing order (deadline, kind, id), each table read along its
# deadline index; a task timeout's kind (0 retry, 1 lease) maps onto TimeoutKind by + 1.
# Task timeouts are read per value of ``deferred`` (the index leads with it): the timeouts
# loop passes the deferred retries by (``troth.engine.timeouts.defer_idle_retry``), a sweep
# that fires everything (``debug.tick``, embedded mode) merges both. Each part takes the
# parameters (until, limit); the whole then takes the limit of the whole.
_DUE_PARTS = {
    "promises": "SELECT at, 0 AS timeout_kind, id FROM promise_timeouts WHERE at <= ?"
    " ORDER BY at, id LIMIT ?",
    "tasks": "SELECT at, kind + 1 AS timeout_kind, id FROM task_timeouts"
    " WHERE deferred = 0 AND at <= ? ORDER BY at, kind, id LIMIT ?",
    "deferred": "SELECT at, kind + 1 AS timeout_kind, id FROM task_timeouts"
    " WHERE deferred = 1 AND at <= ? ORDER BY at, kind, id LIMIT ?",
    "schedules": "SELECT at, 3 AS timeout_kind, id FROM schedule_timeouts WHERE at <= ?"
    " ORDER BY at, id LIMIT ?",
}


def _due(parts: tuple[str, ...]) -> str:
    union = "\nUNION ALL\n".join(
        f"SELECT at, timeout_kind, id FROM ({_DUE_PARTS[part]}) AS {part}" for part in parts
    )
    return f"{union}\nORDER BY at, timeout_kind, id LIMIT ?"


_UNDEFERRED = ("promises", "tasks", "schedules")
_EVERY = ("promises", "tasks", "deferred", "schedules")

# The head of each deadline index, each with its TimeoutKind (as in ``_DUE_PARTS``); the
# earliest of them is the next timeout. SQLite asks these (``SqliteStore.next_timeout``):
# for it a statement is a library call, and index heads cost less than ``_due``'s sorts.
_HEADS = {
    "promises": "SELECT at, 0, id FROM promise_timeouts ORDER BY at, id LIMIT 1",
    "tasks": "SELECT at, kind + 1, id FROM task_timeouts WHERE deferred = 0"
    " ORDER BY at, kind, id LIMIT 1",
    "deferred": "SELECT at, kind + 1, id FROM task_timeouts WHERE deferred = 1"
    " ORDER BY at, kind, id LIMIT 1",
    "schedules": "SELECT at, 3, id FROM schedule_timeouts ORDER BY at, id LIMIT 1",
}


class _TimeoutRow(NamedTuple):
    """Where a kind of timeout is armed: its table, the key columns besides ``id`` with
    their values for this kind, and what else re-arming an entry resets."""

    table: str
    extra: tuple[tuple[str, int], ...] = ()
    reset: str = ""


_TIMEOUT_ROWS: dict[TimeoutKind, _TimeoutRow] = {
    TimeoutKind.PROMISE: _TimeoutRow("promise_timeouts"),
    # A retry armed anew is no longer deferred: its deadline is the machine's again.
    TimeoutKind.TASK_RETRY: _TimeoutRow(
        "task_timeouts", (("kind", TaskTimeoutKind.RETRY),), ", deferred = 0"
    ),
    TimeoutKind.TASK_LEASE: _TimeoutRow(
        "task_timeouts", (("kind", TaskTimeoutKind.LEASE),), ", deferred = 0"
    ),
    TimeoutKind.SCHEDULE: _TimeoutRow("schedule_timeouts"),
}


class TimeoutQueries(NamedTuple):
    """The statements of one kind of timeout. Each takes ``(id, *key)`` first; ``arm``
    and ``is_armed`` then take the deadline."""

    key: tuple[int, ...]  # the values of the key columns besides ``id``
    arm: str
    is_armed: str
    disarm: str


def _timeout_queries(row: _TimeoutRow, sql: Callable[[str], str]) -> TimeoutQueries:
    columns = ("id", *(column for column, _ in row.extra))
    keys = ", ".join(columns)
    where = " AND ".join(f"{column} = ?" for column in columns)
    values = ", ".join("?" for _ in (*columns, "at"))
    return TimeoutQueries(
        key=tuple(value for _, value in row.extra),
        arm=sql(
            f"INSERT INTO {row.table} ({keys}, at) VALUES ({values})"
            f" ON CONFLICT ({keys}) DO UPDATE SET at = excluded.at{row.reset}"
        ),
        is_armed=sql(f"SELECT 1 FROM {row.table} WHERE {where} AND at = ?"),
        disarm=sql(f"DELETE FROM {row.table} WHERE {where}"),
    )


class Queries:
    """The stores' statements in one dialect, built once per dialect."""

    def __init__(self, dialect: Dialect) -> None:
        sql = dialect.sql
        self.dialect = dialect
        self.get_promise = sql(f"SELECT {PROMISE_COLUMNS} FROM promises WHERE id = ?")
        self.set_promise = sql(_UPSERT_PROMISE)
        self.get_task = sql(f"SELECT {TASK_COLUMNS} FROM tasks WHERE id = ?")
        self.set_task = sql(_UPSERT_TASK)
        self.get_schedule = sql(f"SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE id = ?")
        self.set_schedule = sql(_UPSERT_SCHEDULE)
        self.del_schedule = sql("DELETE FROM schedules WHERE id = ?")
        self.callbacks = sql("SELECT awaiter FROM callbacks WHERE awaited = ? ORDER BY position")
        self.listeners = sql("SELECT address FROM listeners WHERE awaited = ? ORDER BY position")
        self.add_callback = sql(_ADD_REGISTRATION.format(table="callbacks", column="awaiter"))
        self.add_listener = sql(_ADD_REGISTRATION.format(table="listeners", column="address"))
        self.clear_callbacks = sql("DELETE FROM callbacks WHERE awaited = ?")
        self.clear_listeners = sql("DELETE FROM listeners WHERE awaited = ?")
        self.scrub = sql(_SCRUB)
        self.timeouts = {kind: _timeout_queries(row, sql) for kind, row in _TIMEOUT_ROWS.items()}
        self.del_task_timeouts = sql("DELETE FROM task_timeouts WHERE id = ?")
        self.due = {
            True: sql(_due(_UNDEFERRED)),  # for a sweep that passes deferred retries by
            False: sql(_due(_EVERY)),
        }
        self.heads = {
            True: tuple(_HEADS[part] for part in _UNDEFERRED),
            False: tuple(_HEADS[part] for part in _EVERY),
        }
        self.defer = sql(
            "UPDATE task_timeouts SET deferred = 1 WHERE id = ? AND kind = 0 AND at = ?"
        )
        self.set_message = sql(dialect.set_message)
        # The outbox entry at a key, locked against delivery acknowledging it meanwhile
        # where several transactions write at once (``SqlStore.is_waiting``).
        self.get_message = sql(
            f"SELECT address, message FROM outbox WHERE key = ?{dialect.lock_shared}"
        )
        self.settled_in_branch = sql(
            f"SELECT {PROMISE_COLUMNS} FROM promises"
            " WHERE branch = ? AND id <> ? AND state <> 'pending' ORDER BY id"
        )

    # -- searches: a query and its parameters, built per request ----------------------------

    def search_promises(
        self, state: PromiseState | None, tags: dict[str, str], after: str | None, limit: int
    ) -> tuple[str, tuple[object, ...]]:
        where, args = self._tag_filter("tags", tags)
        if ORIGIN in tags:
            # Lets the planner walk the origin index: a client lists an execution's call tree
            # by paging the search for its origin (as the reference CLI's ``resonate tree``).
            where.append("origin = ?")
            args.append(tags[ORIGIN])
        if state is not None:
            where.append("state = ?")
            args.append(state.value)
        return self._page(f"SELECT {PROMISE_COLUMNS} FROM promises", where, args, after, limit)

    def search_tasks(
        self, state: TaskState | None, after: str | None, limit: int
    ) -> tuple[str, tuple[object, ...]]:
        where: list[str] = []
        args: list[object] = []
        if state is not None:
            where.append("state = ?")
            args.append(state.value)
        return self._page(f"SELECT {TASK_COLUMNS} FROM tasks", where, args, after, limit)

    def search_schedules(
        self, tags: dict[str, str], after: str | None, limit: int
    ) -> tuple[str, tuple[object, ...]]:
        where, args = self._tag_filter("promise_tags", tags)
        select = f"SELECT {SCHEDULE_COLUMNS} FROM schedules"
        return self._page(select, where, args, after, limit)

    def _tag_filter(self, column: str, tags: dict[str, str]) -> tuple[list[str], list[object]]:
        """Containment: every pair must be present with an equal value."""
        where: list[str] = []
        args: list[object] = []
        for key, value in tags.items():
            where.append(self.dialect.has_tag.format(column=column))
            args += [key, value]
        return where, args

    def _page(
        self, select: str, where: list[str], args: list[object], after: str | None, limit: int
    ) -> tuple[str, tuple[object, ...]]:
        """``select`` filtered by ``where``, the ids after ``after`` in order, ``limit``
        rows at most."""
        if after is not None:
            where.append("id > ?")
            args.append(after)
        conditions = f" WHERE {' AND '.join(where)}" if where else ""
        return self.dialect.sql(f"{select}{conditions} ORDER BY id LIMIT ?"), (*args, limit)
