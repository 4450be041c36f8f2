"""One unit of work in one transaction, retried when it loses a race for its rows.

Write transactions run at READ COMMITTED under the object-lock rule (``locks``); read-only
ones at REPEATABLE READ, so every read of a request sees one committed state. Everything is
sent in pipeline mode: statements whose results are not needed yet travel with the next
read, and the COMMIT with the last writes.

A transaction that PostgreSQL aborts because of another one (a deadlock between object
locks, a serialization failure, a lock wait past ``lock_timeout``) has committed nothing
and is run again from the start, after a short randomized pause, up to ``retries`` times;
then ``troth.storage.service.Retriable`` is raised. Any other error is raised at once,
after rolling back.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable
from typing import TypeVar

import psycopg
from psycopg import errors
from psycopg.pq import TransactionStatus
from psycopg_pool import ConnectionPool, PoolTimeout

from troth.storage.postgres.store import PostgresStore
from troth.storage.service import Retriable

T = TypeVar("T")

Work = Callable[[PostgresStore], T]

# Raised by PostgreSQL when it aborted us in favour of another transaction.
RACES: tuple[type[psycopg.Error], ...] = (
    errors.SerializationFailure,
    errors.DeadlockDetected,
    errors.LockNotAvailable,
)

CHANNEL = "troth_outbox"

_BEGIN_WRITE = "BEGIN ISOLATION LEVEL READ COMMITTED"
_BEGIN_READ = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"

_FIRST_PAUSE = 0.002  # seconds; doubles with each retry
_LONGEST_PAUSE = 0.2


def attempt(
    conn: psycopg.Connection, work: Work[T], retry_timeout: int, *, write: bool
) -> tuple[T, bool]:
    """Run ``work`` once in a transaction on ``conn`` (autocommit mode); answer its value
    and whether it enqueued a message. NOTIFY is sent in the same transaction, so other
    servers hear of a message exactly when it becomes visible."""
    store = PostgresStore(conn, retry_timeout, locking=write)
    try:
        with conn.pipeline():
            conn.execute(_BEGIN_WRITE if write else _BEGIN_READ)
            value = work(store)
            if store.enqueued:
                conn.execute(f"NOTIFY {CHANNEL}")
            conn.execute("COMMIT")
    except BaseException:
        _rollback(conn)
        raise
    return value, store.enqueued


def transact(
    pool: ConnectionPool,
    work: Work[T],
    retry_timeout: int,
    *,
    write: bool,
    retries: int,
) -> tuple[T, bool]:
    """``attempt`` on a pooled connection, again while it loses races, at most
    ``retries`` more times."""
    pause = _FIRST_PAUSE
    for tries in range(retries + 1):
        conn: psycopg.Connection | None = None
        try:
            with pool.connection() as conn:
                return attempt(conn, work, retry_timeout, write=write)
        except PoolTimeout as error:
            # No connection could be had (the database is down or restarting): nothing ran.
            raise Retriable(f"the database is unreachable ({error})") from error
        except RACES as error:
            if tries == retries:
                raise Retriable(
                    f"gave up after {retries + 1} attempts, each aborted by a concurrent"
                    f" transaction ({type(error).__name__}); nothing was committed"
                ) from error
        except psycopg.OperationalError as error:
            if conn is not None and not (conn.closed or conn.broken):
                raise
            # The connection died under the request (a restart, a failover). Whether a
            # commit in flight landed is unknown, but every request is safe to send again
            # (creates are idempotent by id, task operations fenced by version).
            raise Retriable(f"the database connection was lost ({error})") from error
        # Randomized, so the transactions that collided do not collide again in step.
        time.sleep(random.uniform(0, pause))
        pause = min(pause * 2, _LONGEST_PAUSE)
    raise AssertionError("unreachable")


def _rollback(conn: psycopg.Connection) -> None:
    """End a failed transaction, so the connection goes back to the pool clean. A broken
    connection is left alone: the pool discards it, and the server ends its transaction."""
    if conn.closed or conn.broken:
        return
    if conn.info.transaction_status in (TransactionStatus.INTRANS, TransactionStatus.INERROR):
        with contextlib.suppress(psycopg.Error):
            conn.execute("ROLLBACK")
