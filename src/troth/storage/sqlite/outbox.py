"""Reading and acknowledging the outbox (the delivery side of the transactional outbox).

Rows stay until acknowledged, so a message read but not delivered before a crash is read
again after restart. Acknowledgement is by ``seq``: a row superseded since it was read has
a new ``seq`` and survives the acknowledgement of the old one.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection

from troth.storage import codec
from troth.storage.reach import poll_groups
from troth.storage.service import Delivery


def undelivered(
    conn: sqlite3.Connection, limit: int, after: int = 0, groups: Collection[str] | None = None
) -> list[Delivery]:
    """Up to ``limit`` messages after ``seq`` ``after``, in the order they were (last)
    enqueued; with ``groups``, poll messages only of those groups (``reach``)."""
    reach, params = poll_groups(groups, "?")
    rows = conn.execute(
        "SELECT seq, address, message FROM outbox"
        f" WHERE seq > ? AND {reach} ORDER BY seq LIMIT ?",
        (after, *params, limit),
    )
    return [Delivery(seq, address, codec.message(message)) for seq, address, message in rows]


def present(conn: sqlite3.Connection, seqs: list[int]) -> set[int]:
    """Those of ``seqs`` still in the outbox (not acknowledged, not superseded)."""
    rows = conn.execute(
        "SELECT seq FROM outbox WHERE seq IN (SELECT value FROM json_each(?))",
        (codec.text(seqs),),
    )
    return {seq for (seq,) in rows}


def acknowledge(conn: sqlite3.Connection, seqs: list[int]) -> None:
    conn.executemany("DELETE FROM outbox WHERE seq = ?", [(seq,) for seq in seqs])
