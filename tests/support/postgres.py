"""Fresh PostgreSQL databases for tests that run servers on PostgreSQL.

The cluster is the one ``TROTH_TEST_PG_URL`` names (``scripts/pg-cluster.sh start``); tests
that need it are skipped without it. A test of servers gets a database of its own, not only
a schema, because ``LISTEN``/``NOTIFY`` channels are per database; a test of one storage
service in this process may take a ``Schema`` of the shared test database instead, which
is quicker to make.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
from collections.abc import Iterator
from urllib.parse import quote

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo


def cluster_url() -> str:
    url = os.environ.get("TROTH_TEST_PG_URL")
    if not url:
        pytest.skip("TROTH_TEST_PG_URL is not set (export it from: scripts/pg-cluster.sh start)")
    return url


def database_url(pg_url: str, name: str) -> str:
    """``pg_url`` pointing at database ``name``, as a ``postgresql://`` URL (what
    ``troth serve --db`` recognizes), whatever form ``pg_url`` was given in."""
    params = conninfo_to_dict(pg_url)
    user = quote(str(params.get("user", "")), safe="")
    password = params.get("password")
    auth = f"{user}:{quote(str(password), safe='')}@" if password else f"{user}@" if user else ""
    host = params.get("host", "localhost")
    port = f":{params['port']}" if params.get("port") else ""
    return f"postgresql://{auth}{host}{port}/{name}"


@contextlib.contextmanager
def fresh_database(pg_url: str, prefix: str = "troth_test") -> Iterator[str]:
    """A new, empty database on the cluster, dropped afterwards; yields its URL."""
    name = f"{prefix}_{secrets.token_hex(4)}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield database_url(pg_url, name)
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


def schema_url(pg_url: str, name: str) -> str:
    """A connection string whose sessions create and find everything in schema ``name``."""
    return make_conninfo(pg_url, options=f"-c search_path={name}")


class Schema:
    """A schema created for a test and dropped after it; ``url`` connects into it."""

    def __init__(self, pg_url: str, label: str) -> None:
        self.pg_url = pg_url
        # Only identifier characters: the name travels unquoted in ``search_path``.
        label = re.sub(r"[^a-z0-9_]", "_", label.lower())[:40]
        self.name = f"t_{label}_{secrets.token_hex(4)}"
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {self.name}")
        self.url = schema_url(pg_url, self.name)

    def drop(self) -> None:
        with psycopg.connect(self.pg_url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {self.name} CASCADE")
