"""The SQLite schema, its migrations, and how a connection is opened.

``MIGRATIONS[i]`` takes a database from ``PRAGMA user_version = i`` to ``i + 1``; each runs
in one transaction together with the version bump, so a crash mid-migration leaves the
file at the old version. Never edit a released migration: append a new one.

Layout choices, each for a query the server runs on every request or sweep:

- a task shares its promise's id (the machine keys both by it), so no join key is needed;
- callbacks are keyed by (awaited, awaiter) and indexed by awaiter, so settling reads its
  own callbacks and the settlement scrub removes its registrations in O(rows affected);
  ``position`` keeps Lean's registration order;
- the generated ``branch`` and ``origin`` columns index the two tags the server queries
  (preload by branch; the CLI's tree search by origin) without a table of tags;
- each timeout table is indexed by deadline in firing order, so finding the next due
  timeout reads one index entry per table;
- the outbox ``seq`` is AUTOINCREMENT and an upsert replaces the row, so every version of
  a message gets a fresh, never reused ``seq``: acknowledging an old delivery cannot
  delete the message that superseded it.

CHECK constraints hold the invariants a single row can state; a handler that would break
one fails alone instead of committing a state the machine cannot reach.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

_V1 = """
CREATE TABLE promises (
    id          TEXT PRIMARY KEY,
    state       TEXT NOT NULL CHECK (state IN
                    ('pending', 'resolved', 'rejected', 'rejected_canceled', 'rejected_timedout')),
    param       TEXT NOT NULL CHECK (json_type(param) = 'object'),
    value       TEXT NOT NULL CHECK (json_type(value) = 'object'),
    tags        TEXT NOT NULL CHECK (json_type(tags) = 'object'),
    timeout_at  INTEGER NOT NULL CHECK (timeout_at >= 0),
    created_at  INTEGER NOT NULL CHECK (created_at >= 0),
    settled_at  INTEGER CHECK (settled_at >= 0),
    branch      TEXT GENERATED ALWAYS AS (json_extract(tags, '$."resonate:branch"')) VIRTUAL,
    origin      TEXT GENERATED ALWAYS AS (json_extract(tags, '$."resonate:origin"')) VIRTUAL,
    CHECK ((state = 'pending') = (settled_at IS NULL))
);
CREATE INDEX promises_by_state ON promises (state, id);
CREATE INDEX promises_by_branch ON promises (branch, id) WHERE branch IS NOT NULL;
CREATE INDEX promises_by_origin ON promises (origin, id) WHERE origin IS NOT NULL;

CREATE TABLE tasks (
    id       TEXT PRIMARY KEY REFERENCES promises (id),
    state    TEXT NOT NULL CHECK (state IN
                 ('pending', 'acquired', 'suspended', 'halted', 'fulfilled')),
    version  INTEGER NOT NULL CHECK (version >= 0),
    ttl      INTEGER CHECK (ttl >= 0),
    pid      TEXT,
    resumes  TEXT NOT NULL CHECK (json_type(resumes) = 'array'),
    CHECK ((state = 'acquired') = (pid IS NOT NULL)),
    CHECK ((pid IS NULL) = (ttl IS NULL)),
    CHECK (state <> 'fulfilled' OR resumes = '[]')
);
CREATE INDEX tasks_by_state ON tasks (state, id);

CREATE TABLE callbacks (
    awaited   TEXT NOT NULL REFERENCES promises (id),
    awaiter   TEXT NOT NULL REFERENCES promises (id),
    position  INTEGER NOT NULL,
    PRIMARY KEY (awaited, awaiter)
) WITHOUT ROWID;
CREATE INDEX callbacks_by_awaiter ON callbacks (awaiter);

CREATE TABLE listeners (
    awaited   TEXT NOT NULL REFERENCES promises (id),
    address   TEXT NOT NULL,
    position  INTEGER NOT NULL,
    PRIMARY KEY (awaited, address)
) WITHOUT ROWID;

CREATE TABLE schedules (
    id               TEXT PRIMARY KEY,
    cron             TEXT NOT NULL,
    promise_id       TEXT NOT NULL,
    promise_timeout  INTEGER NOT NULL CHECK (promise_timeout >= 0),
    promise_param    TEXT NOT NULL CHECK (json_type(promise_param) = 'object'),
    promise_tags     TEXT NOT NULL CHECK (json_type(promise_tags) = 'object'),
    created_at       INTEGER NOT NULL,
    next_run_at      INTEGER NOT NULL,
    last_run_at      INTEGER,
    CHECK (last_run_at IS NULL OR last_run_at < next_run_at)
);

CREATE TABLE promise_timeouts (
    id  TEXT PRIMARY KEY REFERENCES promises (id),
    at  INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX promise_timeouts_due ON promise_timeouts (at, id);

CREATE TABLE task_timeouts (
    id    TEXT NOT NULL REFERENCES tasks (id),
    kind  INTEGER NOT NULL CHECK (kind IN (0, 1)),  -- 0 = retry, 1 = lease
    at    INTEGER NOT NULL,
    PRIMARY KEY (id, kind)
) WITHOUT ROWID;
CREATE INDEX task_timeouts_due ON task_timeouts (at, kind, id);

-- No reference to schedules: Lean deletes a schedule before its timeout.
CREATE TABLE schedule_timeouts (
    id  TEXT PRIMARY KEY,
    at  INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX schedule_timeouts_due ON schedule_timeouts (at, id);

CREATE TABLE outbox (
    seq      INTEGER PRIMARY KEY AUTOINCREMENT,
    key      TEXT NOT NULL UNIQUE,  -- the machine's outbox key, as a JSON array
    kind     TEXT NOT NULL CHECK (kind IN ('execute', 'unblock')),
    address  TEXT NOT NULL,
    message  TEXT NOT NULL CHECK (json_type(message) = 'object')
);
"""

# One row that ``SqliteService.ping`` rewrites after a write failed: reads keep working on a
# full disk, so only a write can tell that writes work again (``GET /ready``).
_V2 = """
CREATE TABLE health (
    id        INTEGER PRIMARY KEY CHECK (id = 1),
    probed_at INTEGER NOT NULL
);
INSERT INTO health (id, probed_at) VALUES (1, 0);
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


def clear(conn: sqlite3.Connection) -> None:
    """Delete every row (``debug.reset``). The outbox's seq counter is kept on purpose: a
    delivery read before the reset must not match a message enqueued after it."""
    for table in TABLES:
        conn.execute(f"DELETE FROM {table}")
