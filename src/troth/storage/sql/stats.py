"""What a metrics scrape reads from the tables, for both SQL backends (``Admin.stats``)."""

from __future__ import annotations

from troth.protocol.records import TaskState
from troth.storage.service import PoolStats, StorageStats
from troth.storage.sql.connection import Connection
from troth.storage.sql.dialect import Dialect


def storage_stats(conn: Connection, dialect: Dialect, *, pool: PoolStats | None) -> StorageStats:
    """The outbox's depth and oldest row, and the halted tasks (a range of ``tasks_by_state``)."""
    depth, head = conn.execute("SELECT count(*), min(seq) FROM outbox").fetchone()
    query = dialect.sql("SELECT count(*) FROM tasks WHERE state = ?")
    (halted,) = conn.execute(query, (TaskState.HALTED.value,)).fetchone()
    return StorageStats(depth, head, halted, pool)
