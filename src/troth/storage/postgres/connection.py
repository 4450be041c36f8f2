"""How troth's PostgreSQL connections are opened and set up."""

from __future__ import annotations

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.types.string import TextLoader

CONNECT_TIMEOUT = 10  # seconds: startup's first connection, when the URL sets no timeout


def configure(conn: psycopg.Connection, *, lock_timeout: int) -> None:
    """Set up a fresh connection (the pool calls this once per connection).

    JSON columns are read back as text, so the shared codec decodes them with msgspec
    straight into records. ``lock_timeout`` bounds how long a request waits for an object
    lock, so a stuck transaction elsewhere turns into a retriable error, not a hang.
    """
    for type_name in ("json", "jsonb"):
        conn.adapters.register_loader(type_name, TextLoader)
    # No server-side prepared statements: a transaction aborted inside a pipeline
    # (a deadlock, a lock timeout) can lose psycopg's automatic PREPARE while psycopg
    # still believes it exists, and every later use of that statement on the pooled
    # connection would then fail with "prepared statement does not exist".
    conn.prepare_threshold = None
    conn.execute("SELECT set_config('lock_timeout', %s, false)", (f"{lock_timeout}ms",))


def connect(url: str, *, lock_timeout: int = 0) -> psycopg.Connection:
    """One autocommit connection outside the pool (migrations, tests). A host that drops
    packets fails it after ``CONNECT_TIMEOUT`` seconds, unless the URL says otherwise
    (``?connect_timeout=``), rather than after the system's TCP timeout (minutes)."""
    if "connect_timeout" not in conninfo_to_dict(url):
        url = make_conninfo(url, connect_timeout=CONNECT_TIMEOUT)
    conn = psycopg.connect(url, autocommit=True)
    configure(conn, lock_timeout=lock_timeout)
    return conn
