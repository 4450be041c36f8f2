"""Reading and acknowledging the outbox (the delivery side of the transactional outbox).

Rows stay until acknowledged; acknowledgement is by ``seq``, so a row superseded since it
was read has a new ``seq`` and survives the acknowledgement of the old one.
"""

from __future__ import annotations

import psycopg

from troth.storage import codec
from troth.storage.service import Delivery


def undelivered(conn: psycopg.Connection, limit: int) -> list[Delivery]:
    """Up to ``limit`` messages in the order they were (last) enqueued."""
    rows = conn.execute(
        "SELECT seq, kind, address, message FROM outbox ORDER BY seq LIMIT %s", (limit,)
    ).fetchall()
    return [
        Delivery(seq, address, codec.message(kind, message)) for seq, kind, address, message in rows
    ]


def acknowledge(conn: psycopg.Connection, seqs: list[int]) -> None:
    conn.execute("DELETE FROM outbox WHERE seq = ANY(%s)", (seqs,))
