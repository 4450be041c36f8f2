"""A fresh PostgreSQL schema per test module, on the cluster ``TROTH_TEST_PG_URL`` names.

Start one with ``scripts/pg-cluster.sh start`` (it prints the URL). Without the variable
every test here is skipped. Each module gets a schema of its own (``search_path`` in the
connection string), dropped afterwards, so modules never see each other's rows; tests in a
module start from ``debug.reset``'s empty state. Tests that need a schema nobody migrated
yet ask for ``fresh_url``.
"""

from __future__ import annotations

import asyncio
import os
import re
import secrets
from collections.abc import Iterator

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from tests.engine.machine import Machine
from troth.storage.postgres import PostgresService

R = 5000


@pytest.fixture(scope="session")
def pg_url() -> str:
    url = os.environ.get("TROTH_TEST_PG_URL")
    if not url:
        pytest.skip("TROTH_TEST_PG_URL is not set (export it from: scripts/pg-cluster.sh start)")
    return url


def schema_url(pg_url: str, name: str) -> str:
    """A connection string whose sessions create and find everything in schema ``name``."""
    return make_conninfo(pg_url, options=f"-c search_path={name}")


class Schema:
    """A schema created for a test and dropped after it."""

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


@pytest.fixture(scope="module")
def module_url(pg_url: str, request: pytest.FixtureRequest) -> Iterator[str]:
    schema = Schema(pg_url, request.module.__name__.rsplit(".", 1)[-1])
    yield schema.url
    schema.drop()


@pytest.fixture
def fresh_url(pg_url: str, request: pytest.FixtureRequest) -> Iterator[str]:
    schema = Schema(pg_url, request.node.name)
    yield schema.url
    schema.drop()


@pytest.fixture
def url(module_url: str) -> str:
    """The module's schema, emptied (tables are created on first use by the service)."""
    service = PostgresService(module_url)

    async def reset() -> None:
        await service.reset()
        await service.close()

    asyncio.run(reset())
    return module_url


class PgMachine(Machine):
    """The engine tests' ``Machine``, driving ``PostgresService`` instead of SQLite."""

    def __init__(self, url: str, retry_timeout: int = R) -> None:
        self.loop = asyncio.new_event_loop()
        self.service = PostgresService(url, retry_timeout, pool_size=2)


@pytest.fixture
def machine(url: str) -> Iterator[Machine]:
    """Overrides ``tests/engine``'s fixture for the engine tests re-run here."""
    m = PgMachine(url)
    yield m
    m.close()
