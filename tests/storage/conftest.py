"""The ``backend`` every shared storage test runs on, and PostgreSQL schemas for tests.

``backend`` is SQLite (a file in the test's ``tmp_path``) and PostgreSQL (marked ``pg``;
skipped unless ``TROTH_TEST_PG_URL`` names a cluster, from ``scripts/pg-cluster.sh
start``). On PostgreSQL each module gets a schema of its own (``search_path`` in the
connection string), dropped afterwards, so modules never see each other's rows; tests in a
module start from ``debug.reset``'s empty state. Tests that need a schema nobody migrated
yet ask for ``fresh_url``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.postgres import Schema, cluster_url
from tests.support.storage import Backend, PostgresBackend, SqliteBackend
from troth.storage.postgres import PostgresService


@pytest.fixture(params=["sqlite", pytest.param("pg", marks=pytest.mark.pg)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "sqlite":
        return SqliteBackend(tmp_path / "t.db")
    return PostgresBackend(request.getfixturevalue("url"))


@pytest.fixture(scope="session")
def pg_url() -> str:
    return cluster_url()


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
