"""Which outbox rows are still there, and acknowledging them, on SQLite; reading them, and
firing the deferred retries of delivered executes, is shared (``troth.storage.sql.outbox``)."""

from __future__ import annotations

import sqlite3

from troth.storage import codec
from troth.storage.sql.dialect import SQLITE
from troth.storage.sql.outbox import fire_deferred_retries


def present(conn: sqlite3.Connection, seqs: list[int]) -> set[int]:
    """Those of ``seqs`` still in the outbox (not acknowledged, not superseded)."""
    rows = conn.execute(
        "SELECT seq FROM outbox WHERE seq IN (SELECT value FROM json_each(?))",
        (codec.text(seqs),),
    )
    return {seq for (seq,) in rows}


def acknowledge(
    conn: sqlite3.Connection, seqs: list[int], now: int | None, retry_timeout: int
) -> None:
    """Delete the delivered rows ``seqs`` (those still there); with ``now``, fire the
    deferred retries of the executes among them at ``now``."""
    rows = conn.execute(
        "DELETE FROM outbox WHERE seq IN (SELECT value FROM json_each(?)) RETURNING key",
        (codec.text(seqs),),
    ).fetchall()
    if now is not None:
        fire_deferred_retries(conn, SQLITE, [key for (key,) in rows], now, retry_timeout)
