"""The last debounced start of each queue key (``troth.engine.debounce``): one row per
(queue, key), written once per debounced start and never cleared (the engine only believes
a row while its start still waits out its window, so a stale row costs one row per key)."""

from __future__ import annotations

from typing import ClassVar, Generic, TypeVar

from troth.storage.sql.connection import Connection
from troth.storage.sql.dialect import Dialect

TABLES = ("queue_debounces",)


def migration(d: Dialect) -> str:
    return f"""
CREATE TABLE queue_debounces (
    queue {d.key} NOT NULL,
    key   {d.key} NOT NULL,
    task  {d.key} NOT NULL,
    PRIMARY KEY (queue, key)
){d.by_key};
"""


class DebounceQueries:
    def __init__(self, d: Dialect) -> None:
        self.get = d.sql("SELECT task FROM queue_debounces WHERE queue = ? AND key = ?")
        self.set = d.sql(
            "INSERT INTO queue_debounces (queue, key, task) VALUES (?, ?, ?)"
            " ON CONFLICT (queue, key) DO UPDATE SET task = excluded.task"
        )


C = TypeVar("C", bound=Connection)


class DebounceEffects(Generic[C]):
    """The debounce effects of ``troth.engine.Store``, for ``SqlStore``."""

    conn: C
    debounce_queries: ClassVar[DebounceQueries]

    def debounced(self, queue: str, key: str) -> str | None:
        row = self.conn.execute(self.debounce_queries.get, (queue, key)).fetchone()
        return None if row is None else str(row[0])

    def set_debounced(self, queue: str, key: str, task: str) -> None:
        self.conn.execute(self.debounce_queries.set, (queue, key, task))
