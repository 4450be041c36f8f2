"""Fresh PostgreSQL databases for tests that run servers on PostgreSQL.

The cluster is the one ``TROTH_TEST_PG_URL`` names (``scripts/pg-cluster.sh start``); tests
that need it are skipped without it. Each user gets a database of its own, not only a
schema, because ``LISTEN``/``NOTIFY`` channels are per database.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from urllib.parse import quote

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict


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
