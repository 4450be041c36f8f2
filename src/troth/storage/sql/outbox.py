"""Reading the outbox (the delivery side of the transactional outbox), for both backends.

Rows stay until acknowledged, so a message read but not delivered before a crash is read
again after restart. Acknowledgement is by ``seq``: a row superseded since it was read has
a new ``seq`` and survives the acknowledgement of the old one. How a backend acknowledges,
and whether several servers claim rows, is its own (``troth.storage.sqlite.outbox``,
``troth.storage.postgres.outbox``); what an acknowledgement of an execute also does to a
deferred retry is shared (``fire_deferred_retries``).
"""

from __future__ import annotations

import json
from collections.abc import Collection

from troth.storage import codec
from troth.storage.reach import poll_groups
from troth.storage.service import Delivery
from troth.storage.sql.connection import Connection
from troth.storage.sql.dialect import Dialect


def undelivered(
    conn: Connection,
    dialect: Dialect,
    limit: int,
    after: int = 0,
    groups: Collection[str] | None = None,
    *,
    where: str = "TRUE",
) -> list[Delivery]:
    """Up to ``limit`` messages after ``seq`` ``after``, in the order they were (last)
    enqueued; with ``groups``, poll messages only of those groups (``reach``); only rows
    that also meet the backend's condition ``where``."""
    reach, params = poll_groups(groups)
    query = dialect.sql(
        "SELECT seq, address, message FROM outbox"
        f" WHERE seq > ? AND {reach} AND {where} ORDER BY seq LIMIT ?"
    )
    rows = conn.execute(query, (after, *params, limit)).fetchall()
    return [Delivery(seq, address, codec.message(message)) for seq, address, message in rows]


def last_seq(conn: Connection) -> int:
    """The highest seq in the outbox, 0 when it is empty: one step down its primary key."""
    row = conn.execute("SELECT coalesce(max(seq), 0) FROM outbox").fetchone()
    return int(row[0])


_FIRE_DEFERRED = """
UPDATE task_timeouts SET at = ?, deferred = 0 WHERE id = ? AND kind = 0 AND deferred = 1
"""


def fire_deferred_retries(
    conn: Connection, dialect: Dialect, keys: list[str], now: int, retry_timeout: int
) -> None:
    """Fire, at ``now``, the deferred retries of the tasks whose executes (outbox ``keys``,
    just acknowledged) were delivered (``troth.engine.timeouts``, "When to fire").

    A retry is deferred only while its task is pending and this very row waits in the
    outbox, and every transition that could end either re-arms or removes the retry
    (which clears the mark), so a deferred retry whose row was delivered is exactly the
    retry transition of a pending task about to rewrite that row unchanged: its deadline
    becomes ``now + retryTimeout``, and the row it rewrites is the one delivered. Written as
    that one assignment, by primary key, so a backlog's acknowledgements stay one cheap
    statement a row.
    """
    query = dialect.sql(_FIRE_DEFERRED)
    for kind, id, _ in map(json.loads, keys):
        if kind == "execute":
            conn.execute(query, (now + retry_timeout, id))
