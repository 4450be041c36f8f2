"""The SQLite schema's migrations, and how a connection is opened.

``MIGRATIONS[i]`` takes a database from ``PRAGMA user_version = i`` to ``i + 1``; each runs
in one transaction together with the version bump, so a crash mid-migration leaves the
file at the old version. The first is the tables shared with PostgreSQL
(``troth.storage.sql.schema``); never edit a released migration: append a new one.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from troth.storage.sql import debounces, queues, views
from troth.storage.sql.dialect import SQLITE
from troth.storage.sql.schema import deferred_retries, tables

# One row that ``SqliteService.ping`` rewrites after a write failed: reads keep working on a
# full disk, so only a write can tell that writes work again (``GET /ready``).
_HEALTH = """
CREATE TABLE health (
    id        INTEGER PRIMARY KEY CHECK (id = 1),
    probed_at INTEGER NOT NULL
);
INSERT INTO health (id, probed_at) VALUES (1, 0);
"""

# The operator's views: executions and call trees along indexes (``troth.storage.sql.views``);
# the timeouts loop's deferred retries (``troth.storage.sql.schema.deferred_retries``);
# the queues (``troth.storage.sql.queues``).
MIGRATIONS: tuple[str, ...] = (
    tables(SQLITE),
    _HEALTH,
    views.migration(SQLITE),
    deferred_retries(SQLITE),
    queues.migration(SQLITE),
    debounces.migration(SQLITE),
)

SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")


class SchemaTooNew(RuntimeError):
    """The file was written by a newer troth; opening it could corrupt it."""


def migrate(conn: sqlite3.Connection, migrations: Sequence[str] = MIGRATIONS) -> int:
    """Apply the migrations the file has not seen yet; return the resulting version.

    The version is read under the write lock, so two processes opening one fresh file do
    not both migrate it; each script and its version bump commit as one step.
    """
    while True:
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > len(migrations):
                raise SchemaTooNew(
                    f"database schema version {version} is newer than this troth"
                    f" ({len(migrations)})"
                )
            if version == len(migrations):
                conn.execute("COMMIT")
                return version
            for statement in _statements(migrations[version]):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {version + 1}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise


def _statements(script: str) -> list[str]:
    """Split a script into statements (``executescript`` would commit on its own)."""
    statements: list[str] = []
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            statements.append(pending.strip())
            pending = ""
    if pending.strip():
        statements.append(pending.strip())  # let SQLite report the incomplete statement
    return statements


def connect(path: str, *, synchronous: str = "FULL", read_only: bool = False) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit) with troth's pragmas.

    WAL lets readers run beside the single writer; ``synchronous=FULL`` syncs the log at
    every commit, so an acknowledged write survives power loss, not only a crash.
    """
    if synchronous.upper() not in SYNCHRONOUS:
        raise ValueError(f"synchronous must be one of {SYNCHRONOUS}, not {synchronous!r}")
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout = 5000")
    if not read_only:
        conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    conn.execute("PRAGMA foreign_keys = ON")
    if read_only:
        conn.execute("PRAGMA query_only = ON")
    return conn
