"""The queues' tables and effects (``troth.engine.queues``), written once for both SQL
backends.

- ``queues``: a queue's declaration (the spec as JSON) and its counters.
- ``queue_keys``: a row per key that has entries, with its counters; the next key to
  serve is the head of ``queue_keys_next`` among keys with a line, so choosing one reads
  keys, never the line itself.
- ``queue_entries``: the tasks in a queue, admitted or waiting; a key's line is one range
  of ``queue_entries_line``, in the order it is served.
- ``queue_starts``: the log of admissions the rate limits' windows count, pruned as the
  windows move past it.

The counters are kept by the engine in the same transaction as the rows they count; on
PostgreSQL a queue's rows are read and written under the queue's object lock
(``troth.storage.postgres.store``).
"""

from __future__ import annotations

from typing import Any, ClassVar, Generic, TypeVar

import msgspec

from troth.engine.store import Queue, QueueEntry, QueueKey
from troth.protocol.queues import QueueSpec
from troth.storage.sql.connection import Connection
from troth.storage.sql.dialect import Dialect

TABLES = ("queue_starts", "queue_entries", "queue_keys", "queues")  # children first

# More than any count of keys or entries: "no limit" in a comparison.
_UNLIMITED = 2**62


def migration(d: Dialect) -> str:
    i = d.integer
    return f"""
CREATE TABLE queues (
    name     {d.key} PRIMARY KEY,
    spec     {d.json} NOT NULL,
    running  {i} NOT NULL,
    waiting  {i} NOT NULL,
    turn     {i} NOT NULL,
    seq      {i} NOT NULL
){d.by_key};
CREATE TABLE queue_keys (
    queue    {d.key} NOT NULL,
    key      {d.key} NOT NULL,
    running  {i} NOT NULL,
    waiting  {i} NOT NULL,
    served   {i} NOT NULL,
    priority {i} NOT NULL,
    ready_at {i} NOT NULL,
    PRIMARY KEY (queue, key)
){d.by_key};
CREATE INDEX queue_keys_next ON queue_keys (queue, priority, served, key) WHERE waiting > 0;
CREATE TABLE queue_entries (
    task     {d.key} PRIMARY KEY,
    queue    {d.key} NOT NULL,
    key      {d.key} NOT NULL,
    priority {i} NOT NULL,
    seq      {i} NOT NULL,
    admitted {d.small_integer} NOT NULL CHECK (admitted IN (0, 1))
){d.by_key};
CREATE INDEX queue_entries_line ON queue_entries (queue, key, priority, seq) WHERE admitted = 0;
CREATE TABLE queue_starts (
    queue    {d.key} NOT NULL,
    key      {d.key} NOT NULL,
    at       {i} NOT NULL
);
CREATE INDEX queue_starts_queue ON queue_starts (queue, at);
CREATE INDEX queue_starts_key ON queue_starts (queue, key, at);
"""


_KEY_COLUMNS = "queue, key, running, waiting, served, priority, ready_at"
_ENTRY_COLUMNS = "task, queue, key, priority, seq, admitted"


class QueueQueries:
    """The statements of the queue effects in one dialect."""

    def __init__(self, d: Dialect) -> None:
        sql = d.sql
        self.get_queue = sql("SELECT spec, running, waiting, turn, seq FROM queues WHERE name = ?")
        self.set_queue = sql(
            """INSERT INTO queues (name, spec, running, waiting, turn, seq)
            VALUES (?, ?, ?, ?, ?, ?)
            ON CONFLICT (name) DO UPDATE SET spec = excluded.spec, running = excluded.running,
                waiting = excluded.waiting, turn = excluded.turn, seq = excluded.seq"""
        )
        self.search_queues = sql(
            "SELECT spec, running, waiting, turn, seq FROM queues WHERE name > ?"
            " ORDER BY name LIMIT ?"
        )
        self.get_key = sql(f"SELECT {_KEY_COLUMNS} FROM queue_keys WHERE queue = ? AND key = ?")
        self.set_key = sql(
            f"""INSERT INTO queue_keys ({_KEY_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (queue, key) DO UPDATE SET running = excluded.running,
                waiting = excluded.waiting, served = excluded.served,
                priority = excluded.priority, ready_at = excluded.ready_at"""
        )
        self.del_key = sql("DELETE FROM queue_keys WHERE queue = ? AND key = ?")
        self.next_key = sql(
            f"""SELECT {_KEY_COLUMNS} FROM queue_keys
            WHERE queue = ? AND waiting > 0 AND running < ? AND ready_at <= ?
            ORDER BY priority, served, key LIMIT 1"""
        )
        self.busiest_keys = sql(
            f"SELECT {_KEY_COLUMNS} FROM queue_keys WHERE queue = ?"
            " ORDER BY running + waiting DESC, key LIMIT ?"
        )
        self.get_entry = sql(f"SELECT {_ENTRY_COLUMNS} FROM queue_entries WHERE task = ?")
        self.set_entry = sql(
            f"""INSERT INTO queue_entries ({_ENTRY_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)
            ON CONFLICT (task) DO UPDATE SET queue = excluded.queue, key = excluded.key,
                priority = excluded.priority, seq = excluded.seq, admitted = excluded.admitted"""
        )
        self.del_entry = sql("DELETE FROM queue_entries WHERE task = ?")
        self.head = sql(
            f"""SELECT {_ENTRY_COLUMNS} FROM queue_entries
            WHERE queue = ? AND key = ? AND admitted = 0 ORDER BY priority, seq LIMIT 1"""
        )
        self.add_start = sql("INSERT INTO queue_starts (queue, key, at) VALUES (?, ?, ?)")
        self.starts = sql(
            "SELECT at FROM queue_starts WHERE queue = ? AND at > ? ORDER BY at DESC LIMIT ?"
        )
        self.key_starts = sql(
            "SELECT at FROM queue_starts WHERE queue = ? AND key = ? AND at > ?"
            " ORDER BY at DESC LIMIT ?"
        )
        self.forget_starts = sql("DELETE FROM queue_starts WHERE queue = ? AND at <= ?")
        self.position = sql(
            """SELECT COUNT(*) FROM queue_entries AS me JOIN queue_entries AS e
            ON e.queue = me.queue AND e.key = me.key AND e.admitted = 0
                AND (e.priority < me.priority OR (e.priority = me.priority AND e.seq <= me.seq))
            WHERE me.task = ?"""
        )


def _queue(row: Any) -> Queue:
    spec, running, waiting, turn, seq = row
    return Queue(msgspec.json.decode(spec, type=QueueSpec), running, waiting, turn, seq)


def _key(row: Any) -> QueueKey:
    return QueueKey(*row)


def _entry(row: Any) -> QueueEntry:
    task, queue, key, priority, seq, admitted = row
    return QueueEntry(task, queue, key, priority, seq, bool(admitted))


C = TypeVar("C", bound=Connection)


class QueueEffects(Generic[C]):
    """The queue effects of ``troth.engine.Store``, for ``SqlStore``."""

    conn: C
    queue_queries: ClassVar[QueueQueries]

    def get_queue(self, name: str) -> Queue | None:
        row = self.conn.execute(self.queue_queries.get_queue, (name,)).fetchone()
        return None if row is None else _queue(row)

    def set_queue(self, queue: Queue) -> None:
        spec = msgspec.json.encode(queue.spec).decode()
        row = (queue.spec.name, spec, queue.running, queue.waiting, queue.turn, queue.seq)
        self.conn.execute(self.queue_queries.set_queue, row)

    def search_queues(self, after: str | None, limit: int) -> list[Queue]:
        rows = self.conn.execute(self.queue_queries.search_queues, (after or "", limit))
        return [_queue(row) for row in rows.fetchall()]

    def get_queue_key(self, queue: str, key: str) -> QueueKey | None:
        row = self.conn.execute(self.queue_queries.get_key, (queue, key)).fetchone()
        return None if row is None else _key(row)

    def set_queue_key(self, key: QueueKey) -> None:
        if key.running <= 0 and key.waiting <= 0:
            self.conn.execute(self.queue_queries.del_key, (key.queue, key.key))
            return
        row = (key.queue, key.key, key.running, key.waiting, key.served, key.priority, key.ready_at)
        self.conn.execute(self.queue_queries.set_key, row)

    def next_queue_key(self, queue: str, limit: int | None, now: int) -> QueueKey | None:
        args = (queue, _UNLIMITED if limit is None else limit, now)
        row = self.conn.execute(self.queue_queries.next_key, args).fetchone()
        return None if row is None else _key(row)

    def busiest_queue_keys(self, queue: str, limit: int) -> list[QueueKey]:
        rows = self.conn.execute(self.queue_queries.busiest_keys, (queue, limit)).fetchall()
        return [_key(row) for row in rows]

    def get_queue_entry(self, task: str) -> QueueEntry | None:
        row = self.conn.execute(self.queue_queries.get_entry, (task,)).fetchone()
        return None if row is None else _entry(row)

    def set_queue_entry(self, entry: QueueEntry) -> None:
        row = (entry.task, entry.queue, entry.key, entry.priority, entry.seq, int(entry.admitted))
        self.conn.execute(self.queue_queries.set_entry, row)

    def del_queue_entry(self, task: str) -> None:
        self.conn.execute(self.queue_queries.del_entry, (task,))

    def queue_head(self, queue: str, key: str) -> QueueEntry | None:
        row = self.conn.execute(self.queue_queries.head, (queue, key)).fetchone()
        return None if row is None else _entry(row)

    def add_queue_start(self, queue: str, key: str, at: int) -> None:
        self.conn.execute(self.queue_queries.add_start, (queue, key, at))

    def queue_starts(self, queue: str, key: str | None, since: int, limit: int) -> list[int]:
        if key is None:
            rows = self.conn.execute(self.queue_queries.starts, (queue, since, limit))
        else:
            rows = self.conn.execute(self.queue_queries.key_starts, (queue, key, since, limit))
        return sorted(at for (at,) in rows.fetchall())

    def forget_queue_starts(self, queue: str, before: int) -> None:
        self.conn.execute(self.queue_queries.forget_starts, (queue, before))

    def queue_position(self, task: str) -> int:
        row = self.conn.execute(self.queue_queries.position, (task,)).fetchone()
        return int(row[0]) if row is not None else 0
