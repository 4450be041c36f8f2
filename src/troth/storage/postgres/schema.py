"""The PostgreSQL schema and its versioned migrations.

``MIGRATIONS[i]`` takes a database from version ``i`` to ``i + 1`` (the single row of
``troth_schema_version``; no table means version 0). Several servers may start against one
fresh database at once, so ``migrate`` runs under a transaction-scoped advisory lock: the
first migrates, the others wait and then find nothing to do. Each migration commits with
its version bump, so a crash mid-migration leaves the old version. Never edit a released
migration: append a new one.

The tables mirror the SQLite backend (``troth.storage.sqlite.schema``), so the shared codec
and snapshot read both. Differences, each for a reason:

- payloads, tags and messages are ``json`` (text kept as written, so key order and the
  ``\\u0000`` escape survive, which ``jsonb`` would lose or refuse); ``branch`` and
  ``origin`` are stored generated columns over the two tags the server queries;
- the outbox ``seq`` comes from a sequence that an upsert draws from again, so every version
  of a message has a fresh ``seq`` and a reset never rewinds it;
- each timeout table is indexed by deadline in firing order, so the due scan of the
  timeouts loop reads index prefixes only;
- ids are ``COLLATE "C"``: ``ORDER BY id``, search cursors and the firing order of ties
  follow code points, as in SQLite and the oracle, whatever the database's locale;
- ``callbacks_by_awaiter`` serves the settlement scrub, ``promises_by_branch`` preload.

CHECK constraints hold the invariants a single row can state, as in SQLite.
"""

from __future__ import annotations

from collections.abc import Sequence

import psycopg

_V1 = """
CREATE TABLE promises (
    id          text COLLATE "C" PRIMARY KEY,
    state       text NOT NULL CHECK (state IN
                    ('pending', 'resolved', 'rejected', 'rejected_canceled', 'rejected_timedout')),
    param       json NOT NULL CHECK (json_typeof(param) = 'object'),
    value       json NOT NULL CHECK (json_typeof(value) = 'object'),
    tags        json NOT NULL CHECK (json_typeof(tags) = 'object'),
    timeout_at  bigint NOT NULL CHECK (timeout_at >= 0),
    created_at  bigint NOT NULL CHECK (created_at >= 0),
    settled_at  bigint CHECK (settled_at >= 0),
    branch      text COLLATE "C" GENERATED ALWAYS AS (tags ->> 'resonate:branch') STORED,
    origin      text COLLATE "C" GENERATED ALWAYS AS (tags ->> 'resonate:origin') STORED,
    CHECK ((state = 'pending') = (settled_at IS NULL))
);
CREATE INDEX promises_by_state ON promises (state, id);
CREATE INDEX promises_by_branch ON promises (branch, id) WHERE branch IS NOT NULL;
CREATE INDEX promises_by_origin ON promises (origin, id) WHERE origin IS NOT NULL;

CREATE TABLE tasks (
    id       text COLLATE "C" PRIMARY KEY REFERENCES promises (id),
    state    text NOT NULL CHECK (state IN
                 ('pending', 'acquired', 'suspended', 'halted', 'fulfilled')),
    version  bigint NOT NULL CHECK (version >= 0),
    ttl      bigint CHECK (ttl >= 0),
    pid      text,
    resumes  json NOT NULL CHECK (json_typeof(resumes) = 'array'),
    CHECK ((state = 'acquired') = (pid IS NOT NULL)),
    CHECK ((pid IS NULL) = (ttl IS NULL)),
    CHECK (state <> 'fulfilled' OR json_array_length(resumes) = 0)
);
CREATE INDEX tasks_by_state ON tasks (state, id);

CREATE TABLE callbacks (
    awaited   text COLLATE "C" NOT NULL REFERENCES promises (id),
    awaiter   text COLLATE "C" NOT NULL REFERENCES promises (id),
    position  bigint NOT NULL,
    PRIMARY KEY (awaited, awaiter)
);
CREATE INDEX callbacks_by_awaiter ON callbacks (awaiter);

CREATE TABLE listeners (
    awaited   text COLLATE "C" NOT NULL REFERENCES promises (id),
    address   text COLLATE "C" NOT NULL,
    position  bigint NOT NULL,
    PRIMARY KEY (awaited, address)
);

CREATE TABLE schedules (
    id               text COLLATE "C" PRIMARY KEY,
    cron             text NOT NULL,
    promise_id       text NOT NULL,
    promise_timeout  bigint NOT NULL CHECK (promise_timeout >= 0),
    promise_param    json NOT NULL CHECK (json_typeof(promise_param) = 'object'),
    promise_tags     json NOT NULL CHECK (json_typeof(promise_tags) = 'object'),
    created_at       bigint NOT NULL,
    next_run_at      bigint NOT NULL,
    last_run_at      bigint,
    CHECK (last_run_at IS NULL OR last_run_at < next_run_at)
);

CREATE TABLE promise_timeouts (
    id  text COLLATE "C" PRIMARY KEY REFERENCES promises (id),
    at  bigint NOT NULL
);
CREATE INDEX promise_timeouts_due ON promise_timeouts (at, id);

CREATE TABLE task_timeouts (
    id    text COLLATE "C" NOT NULL REFERENCES tasks (id),
    kind  smallint NOT NULL CHECK (kind IN (0, 1)),  -- 0 = retry, 1 = lease
    at    bigint NOT NULL,
    PRIMARY KEY (id, kind)
);
CREATE INDEX task_timeouts_due ON task_timeouts (at, kind, id);

-- No reference to schedules: Lean deletes a schedule before its timeout.
CREATE TABLE schedule_timeouts (
    id  text COLLATE "C" PRIMARY KEY,
    at  bigint NOT NULL
);
CREATE INDEX schedule_timeouts_due ON schedule_timeouts (at, id);

CREATE SEQUENCE outbox_seq;
CREATE TABLE outbox (
    seq      bigint PRIMARY KEY DEFAULT nextval('outbox_seq'),
    key      text NOT NULL UNIQUE,  -- the machine's outbox key, as a JSON array
    kind     text NOT NULL CHECK (kind IN ('execute', 'unblock')),
    address  text NOT NULL,
    message  json NOT NULL CHECK (json_typeof(message) = 'object')
);
"""

# Delivery claims (troth.storage.postgres.outbox.claim): which server delivers a row, and
# until when (the database's clock, so the servers' clocks need not agree). An upsert that
# supersedes a row clears its claim: the newer message is anybody's to deliver.
_V2 = """
ALTER TABLE outbox ADD COLUMN claimed_by text, ADD COLUMN claimed_until timestamptz;
"""

MIGRATIONS: tuple[str, ...] = (_V1, _V2)

# Children before parents, so references hold at every step of a reset.
TABLES: tuple[str, ...] = (
    "outbox",
    "schedule_timeouts",
    "task_timeouts",
    "promise_timeouts",
    "schedules",
    "listeners",
    "callbacks",
    "tasks",
    "promises",
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


def clear(conn: psycopg.Connection) -> None:
    """Delete every row (``debug.reset``). DELETE rather than TRUNCATE: a reset is for tests
    and small tables, where TRUNCATE's new files and their fsyncs cost far more. The outbox
    sequence is kept on purpose: a delivery read before a reset must not match a message
    enqueued after it."""
    for table in TABLES:
        conn.execute(f"DELETE FROM {table}")
