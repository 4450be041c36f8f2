"""Reading the outbox (the delivery side of the transactional outbox), for both backends.

Rows stay until acknowledged, so a message read but not delivered before a crash is read
again after restart. Acknowledgement is by ``seq``: a row superseded since it was read has
a new ``seq`` and survives the acknowledgement of the old one. How a backend acknowledges,
and whether several servers claim rows, is its own (``troth.storage.sqlite.outbox``,
``troth.storage.postgres.outbox``).
"""

from __future__ import annotations

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
