"""Which outbox rows are still there, and acknowledging them, on SQLite; reading them is
shared (``troth.storage.sql.outbox``)."""

from __future__ import annotations

import sqlite3

from troth.storage import codec


def present(conn: sqlite3.Connection, seqs: list[int]) -> set[int]:
    """Those of ``seqs`` still in the outbox (not acknowledged, not superseded)."""
    rows = conn.execute(
        "SELECT seq FROM outbox WHERE seq IN (SELECT value FROM json_each(?))",
        (codec.text(seqs),),
    )
    return {seq for (seq,) in rows}


def acknowledge(conn: sqlite3.Connection, seqs: list[int]) -> None:
    conn.executemany("DELETE FROM outbox WHERE seq = ?", [(seq,) for seq in seqs])
