"""Backends to record histories against, as one parameter: ``backend`` opens a fresh target.

- ``sqlite``: a ``SqliteService`` in this process;
- ``postgres``: three ``PostgresService`` instances (pools of their own) on one schema, the
  way several servers share a database; client ``i`` uses instance ``i mod 3``;
- ``sqlite-server``: one ``troth serve --debug`` process on a SQLite file;
- ``postgres-servers``: three ``troth serve --debug --db postgresql://…`` processes on one
  schema.

The PostgreSQL ones need ``TROTH_TEST_PG_URL`` (``scripts/pg-cluster.sh start``) and are
skipped without it. Servers live for the module; each history starts from ``debug.reset``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.linearizability.history import RETRY_TIMEOUT
from tests.linearizability.targets import HttpTarget, Opener, ServiceTarget, Target
from tests.support.postgres import Schema
from tests.support.servers import TrothServer
from troth.storage.postgres import PostgresService
from troth.storage.sqlite import SqliteService

SERVERS = 3  # PostgreSQL-backed servers (or in-process services) sharing one database


@pytest.fixture(scope="module")
def pg_schema() -> Iterator[Schema]:
    pg_url = os.environ.get("TROTH_TEST_PG_URL")
    if not pg_url:
        pytest.skip("TROTH_TEST_PG_URL is not set (export it from: scripts/pg-cluster.sh start)")
    schema = Schema(pg_url, "linearizability")
    yield schema
    schema.drop()


def url_with_schema(schema: Schema) -> str:
    """The schema as a ``postgresql://`` URL: ``troth serve --db`` takes PostgreSQL only in
    URL form (anything else is a SQLite file name)."""
    assert schema.pg_url.startswith(("postgres://", "postgresql://")), schema.pg_url
    options = quote(f"-c search_path={schema.name}")
    return f"{schema.pg_url}{'&' if '?' in schema.pg_url else '?'}options={options}"


def _servers(db: str, tmp: Path, count: int) -> list[TrothServer]:
    flags = ("--debug", "--tasks-retry-timeout", str(RETRY_TIMEOUT))
    # ``db`` stays a string: as a Path, ``postgresql://`` would lose a slash.
    servers = [TrothServer(db, tmp / f"server{n}.log", flags) for n in range(count)]
    for server in servers:
        try:
            server.start()
        except BaseException:
            for started in servers:
                started.close()
            raise
    return servers


@pytest.fixture(scope="module")
def sqlite_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    tmp = tmp_path_factory.mktemp("lin-sqlite")
    servers = _servers(str(tmp / "t.db"), tmp, 1)
    yield [s.url for s in servers]
    for server in servers:
        server.close()


@pytest.fixture(scope="module")
def postgres_servers(
    pg_schema: Schema, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[str]]:
    servers = _servers(url_with_schema(pg_schema), tmp_path_factory.mktemp("lin-pg"), SERVERS)
    yield [s.url for s in servers]
    for server in servers:
        server.close()


def _sqlite_opener(tmp_path: Path) -> Opener:
    count = iter(range(1_000_000))

    async def open() -> Target:
        path = tmp_path / f"history{next(count)}.db"
        return ServiceTarget([SqliteService(str(path), retry_timeout=RETRY_TIMEOUT)])

    return open


def _postgres_opener(url: str) -> Opener:
    async def open() -> Target:
        services = [
            PostgresService(url, retry_timeout=RETRY_TIMEOUT, pool_size=8) for _ in range(SERVERS)
        ]
        await services[0].reset()
        return ServiceTarget(services)

    return open


def _http_opener(urls: list[str]) -> Opener:
    async def open() -> Target:
        target = HttpTarget(urls)
        await target.prepare()
        return target

    return open


BACKENDS = [
    "sqlite",
    pytest.param("postgres", marks=pytest.mark.pg),
    pytest.param("sqlite-server", marks=pytest.mark.slow),  # a troth serve process
    pytest.param("postgres-servers", marks=pytest.mark.pg),
]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Opener:
    match request.param:
        case "sqlite":
            return _sqlite_opener(tmp_path)
        case "postgres":
            return _postgres_opener(request.getfixturevalue("pg_schema").url)
        case "sqlite-server":
            return _http_opener(request.getfixturevalue("sqlite_server"))
        case _:
            return _http_opener(request.getfixturevalue("postgres_servers"))


@pytest.fixture
def sqlite_backend(tmp_path: Path) -> Opener:
    return _sqlite_opener(tmp_path)
