"""``SqliteStore``: the engine's effects (``troth.storage.sql.store``) on a SQLite connection.

The ``Writer`` holds the connection for writes, a reader for reads; each begins and ends
the transactions the store runs in.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Generator
from typing import Any, TypeVar

from troth.engine.store import Timeout, TimeoutKind
from troth.storage.sql.debounces import DebounceQueries
from troth.storage.sql.dialect import SQLITE
from troth.storage.sql.queries import Queries
from troth.storage.sql.queues import QueueQueries
from troth.storage.sql.store import SqlStore

T = TypeVar("T")


class SqliteStore(SqlStore[sqlite3.Connection]):
    """The ``troth.engine.Store`` effects on an open SQLite connection."""

    queries = Queries(SQLITE)
    queue_queries = QueueQueries(SQLITE)
    debounce_queries = DebounceQueries(SQLITE)

    def next_timeout(self, *, deferring: bool = False) -> Timeout | None:
        """The earliest of the deadline indexes' heads (with ``deferring``, none of the
        deferred retries). A statement here is a call into the library, not a round trip,
        and index heads cost less than the sorted union of ``due``; the sweep asks for
        this before every transition."""
        queries = self.queries.heads[deferring]
        heads = (self.conn.execute(query).fetchone() for query in queries)
        return min(
            (Timeout(at, TimeoutKind(kind), id) for at, kind, id in filter(None, heads)),
            default=None,
        )

    def _stream(
        self, query: str, args: tuple[object, ...], decode: Callable[[Any], T]
    ) -> Generator[T, None, None]:
        """The rows stepped one at a time; closing the generator finalizes the statement,
        so the rows never taken are never read."""
        cursor = self.conn.execute(query, args)
        try:
            for row in cursor:
                yield decode(row)
        finally:
            cursor.close()
