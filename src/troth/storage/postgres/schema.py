"""The PostgreSQL schema and its versioned migrations.

``MIGRATIONS[i]`` takes a database from version ``i`` to ``i + 1`` (the single row of
``troth_schema_version``; no table means version 0). Several servers may start against one
fresh database at once, so ``migrate`` runs under a transaction-scoped advisory lock: the
first migrates, the others wait and then find nothing to do. Each migration commits with
its version bump, so a crash mid-migration leaves the old version. Never edit a released
migration: append a new one.

The first migration is the tables shared with SQLite (``troth.storage.sql.schema``), in
the PostgreSQL dialect (``troth.storage.sql.dialect`` says what differs, and why).
"""

from __future__ import annotations

from collections.abc import Sequence

import psycopg

from troth.storage.sql import debounces, queues, views
from troth.storage.sql.dialect import POSTGRES
from troth.storage.sql.schema import deferred_retries, tables

# Delivery claims (troth.storage.postgres.outbox.claim): which server delivers a row, and
# until when (the database's clock, so the servers' clocks need not agree). An upsert that
# supersedes a row clears its claim: the newer message is anybody's to deliver.
_CLAIMS = """
ALTER TABLE outbox ADD COLUMN claimed_by text, ADD COLUMN claimed_until timestamptz;
"""

# The operator's views: executions and call trees along indexes (``troth.storage.sql.views``);
# the timeouts loop's deferred retries (``troth.storage.sql.schema.deferred_retries``).
MIGRATIONS: tuple[str, ...] = (
    tables(POSTGRES),
    _CLAIMS,
    views.migration(POSTGRES),
    deferred_retries(POSTGRES),
    queues.migration(POSTGRES),
    debounces.migration(POSTGRES),
)

# The two-key advisory lock space is apart from the one-key space the object locks use
# (``troth.storage.postgres.locks``), so migrating never waits on a request's lock.
_MIGRATION_LOCK = (0x7472, 0x6F74)  # "tr", "ot"


class SchemaTooNew(RuntimeError):
    """The database was migrated by a newer troth; serving it could corrupt it."""


def migrate(conn: psycopg.Connection, migrations: Sequence[str] = MIGRATIONS) -> int:
    """Apply the migrations the database has not seen yet; return the resulting version.

    ``conn`` must be in autocommit mode (each migration is its own transaction).
    """
    while True:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", _MIGRATION_LOCK)
            conn.execute(
                "CREATE TABLE IF NOT EXISTS troth_schema_version ("
                " version integer NOT NULL CHECK (version >= 0),"
                " only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row))"
            )
            row = conn.execute("SELECT version FROM troth_schema_version").fetchone()
            version = 0 if row is None else row[0]
            if version > len(migrations):
                raise SchemaTooNew(
                    f"database schema version {version} is newer than this troth"
                    f" ({len(migrations)})"
                )
            if version == len(migrations):
                return version
            conn.execute(migrations[version])
            conn.execute(
                "INSERT INTO troth_schema_version (version) VALUES (%s)"
                " ON CONFLICT (only_row) DO UPDATE SET version = excluded.version",
                (version + 1,),
            )
