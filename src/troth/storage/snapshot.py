"""``debug.snap``: the whole stored state as the wire ``Snapshot`` (no projection).

Shared by the backends: the tables and columns are the same in each, and both sqlite3 and
psycopg connections answer ``execute(sql).fetchall()``.
"""

from __future__ import annotations

from typing import Any, Protocol

from troth.protocol.responses import (
    CallbackEntry,
    ListenerEntry,
    OutboxEntry,
    PromiseTimeoutEntry,
    ScheduleTimeoutEntry,
    Snapshot,
    TaskTimeoutEntry,
    make_snapshot,
)
from troth.storage import codec
from troth.storage.codec import PROMISE_COLUMNS, SCHEDULE_COLUMNS, TASK_COLUMNS


class _Rows(Protocol):
    def fetchall(self) -> list[Any]: ...


class Connection(Protocol):
    """What a snapshot needs of a connection (JSON columns must read back as text)."""

    def execute(self, sql: Any) -> _Rows: ...


def snapshot(conn: Connection) -> Snapshot:
    """Read everything; the caller holds a read transaction so the parts agree."""

    def rows(sql: str) -> list[tuple]:
        return conn.execute(sql).fetchall()

    return make_snapshot(
        promises=[codec.promise(r) for r in rows(f"SELECT {PROMISE_COLUMNS} FROM promises")],
        promise_timeouts=[
            PromiseTimeoutEntry(id, at) for id, at in rows("SELECT id, at FROM promise_timeouts")
        ],
        callbacks=[
            CallbackEntry(awaiter=awaiter, awaited=awaited)
            for awaited, awaiter in rows("SELECT awaited, awaiter FROM callbacks")
        ],
        listeners=[
            ListenerEntry(id, address)
            for id, address in rows("SELECT awaited, address FROM listeners")
        ],
        tasks=[codec.task(r).record() for r in rows(f"SELECT {TASK_COLUMNS} FROM tasks")],
        task_timeouts=[
            TaskTimeoutEntry(id, kind, at)
            for id, kind, at in rows("SELECT id, kind, at FROM task_timeouts")
        ],
        messages=[
            OutboxEntry(address, codec.message(message))
            for address, message in rows("SELECT address, message FROM outbox")
        ],
        schedules=[codec.schedule(r) for r in rows(f"SELECT {SCHEDULE_COLUMNS} FROM schedules")],
        schedule_timeouts=[
            ScheduleTimeoutEntry(id, at) for id, at in rows("SELECT id, at FROM schedule_timeouts")
        ],
    )
