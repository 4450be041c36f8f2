"""Fixtures for the scale-out tests: a fresh PostgreSQL database per test, and a cluster of
``troth serve`` processes on it.

The tests need the PostgreSQL cluster that ``TROTH_TEST_PG_URL`` names (start one with
``scripts/pg-cluster.sh start``); without it they are skipped. Each test gets a database of
its own, not only a schema, because ``LISTEN``/``NOTIFY`` channels are per database: the
servers of one test never hear another's.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from scaleout._cluster import Cluster


@pytest.fixture(scope="session")
def pg_url() -> str:
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


@pytest.fixture
def db_url(pg_url: str) -> Iterator[str]:
    name = f"troth_scaleout_{secrets.token_hex(4)}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    yield database_url(pg_url, name)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


@pytest.fixture
def make_cluster(db_url: str, tmp_path: Path) -> Iterator[Callable[..., Cluster]]:
    """``make_cluster(size, flags)``: servers on this test's database, closed afterwards."""
    clusters: list[Cluster] = []

    def make(size: int = 3, flags: tuple[str, ...] = ()) -> Cluster:
        cluster = Cluster(db_url, tmp_path, size, flags)
        clusters.append(cluster)
        return cluster.start()

    yield make
    for cluster in clusters:
        cluster.close()
