"""Reading, claiming and acknowledging the outbox (the delivery side of the transactional
outbox).

Rows stay until acknowledged; acknowledgement is by ``seq``, so a row superseded since it
was read has a new ``seq`` and survives the acknowledgement of the old one.

Several servers read the same rows, so a server claims the rows it is about to deliver:
a claim names its holder and lasts until an instant on the database's clock. A row claimed
by one server is left alone by the others until that claim lapses, which is how the rows of
a server that died are taken over. Rows are claimed ``FOR UPDATE SKIP LOCKED``: two servers
claiming overlapping rows at once never wait for (or deadlock with) each other, and each
row goes to exactly one of them.
"""

from __future__ import annotations

from collections.abc import Collection

import psycopg

from troth.storage.service import Delivery
from troth.storage.sql import outbox
from troth.storage.sql.dialect import POSTGRES

_UNCLAIMED = "(claimed_until IS NULL OR claimed_until <= clock_timestamp())"


def undelivered(
    conn: psycopg.Connection,
    limit: int,
    after: int = 0,
    groups: Collection[str] | None = None,
    unclaimed: bool = False,
) -> list[Delivery]:
    """Up to ``limit`` messages after ``seq`` ``after``, in the order they were (last)
    enqueued; with ``groups``, poll messages only of those groups (``reach``); with
    ``unclaimed``, none that a server holds a live claim on."""
    where = _UNCLAIMED if unclaimed else "TRUE"
    return outbox.undelivered(conn, POSTGRES, limit, after, groups, where=where)


def acknowledge(
    conn: psycopg.Connection, seqs: list[int], now: int | None, retry_timeout: int
) -> None:
    """Delete the delivered rows ``seqs`` (those still there); with ``now``, fire the
    deferred retries of the executes among them at ``now``.

    The deferred retries are written without their objects' locks: the one row each
    assignment touches is row-locked by PostgreSQL, so it serializes with any request on
    the task that removes or re-arms it, and a sweep deferring a retry holds its row of the
    outbox (``SqlStore.is_waiting``), so this DELETE waits for that sweep to commit and the
    assignment then sees the mark.
    """
    rows = conn.execute("DELETE FROM outbox WHERE seq = ANY(%s) RETURNING key", (seqs,))
    if now is not None:
        keys = [key for (key,) in rows.fetchall()]
        outbox.fire_deferred_retries(conn, POSTGRES, keys, now, retry_timeout)


_CLAIM = """
UPDATE outbox SET claimed_by = %(holder)s,
    claimed_until = clock_timestamp() + %(ttl)s * interval '1 millisecond'
WHERE seq IN (
    SELECT seq FROM outbox
    WHERE seq = ANY(%(seqs)s)
      AND (claimed_by IS NULL OR claimed_by = %(holder)s OR claimed_until <= clock_timestamp())
    ORDER BY seq
    FOR UPDATE SKIP LOCKED)
RETURNING seq
"""


def claim(conn: psycopg.Connection, seqs: list[int], holder: str, ttl: int) -> set[int]:
    """Claim for ``holder`` for ``ttl`` ms those of ``seqs`` that nobody else holds; the
    seqs claimed. ``holder`` renews its own claims; a ``ttl`` of 0 gives them up."""
    rows = conn.execute(_CLAIM, {"holder": holder, "ttl": ttl, "seqs": seqs}).fetchall()
    return {seq for (seq,) in rows}
