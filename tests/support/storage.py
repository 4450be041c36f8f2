"""Storage backends under test, and the requests the storage tests drive them with.

``tests/storage`` runs one suite over every backend: a test asks for the ``backend``
fixture and gets a ``SqliteBackend`` (a file of its own) or a ``PostgresBackend`` (a
schema of its own, emptied), each opening services and writing through its store the same
way, so a test states its scenario once.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import psycopg

from troth.protocol.envelope import Request
from troth.protocol.records import PromiseRecord, PromiseState, Value
from troth.protocol.requests import (
    CreateAction,
    PromiseCreateRequest,
    PromiseGetRequest,
    PromiseRegisterListenerRequest,
    TaskCreateRequest,
)
from troth.protocol.responses import Reply
from troth.storage.postgres import PostgresService, PostgresStore
from troth.storage.postgres import migrate as pg_migrate
from troth.storage.postgres.connection import connect as pg_connect
from troth.storage.postgres.transaction import attempt
from troth.storage.service import Service
from troth.storage.sql.store import SqlStore
from troth.storage.sqlite import SqliteService, SqliteStore, connect, migrate

T = TypeVar("T")

TARGET = "poll://any@workers"
R = 5000  # the retry timeout the storage tests run with


# -- requests and records -------------------------------------------------------------------


def create(id: str, timeout_at: int = 100_000) -> Request:
    return Request("promise.create", "c", PromiseCreateRequest(id, timeout_at, Value(), {}))


def timer(id: str, timeout_at: int) -> Request:
    tags = {"resonate:timer": "true"}
    return Request("promise.create", "c", PromiseCreateRequest(id, timeout_at, Value(), tags))


def targeted(id: str, timeout_at: int = 100_000) -> Request:
    return Request(
        "promise.create",
        "c",
        PromiseCreateRequest(id, timeout_at, Value(), {"resonate:target": TARGET}),
    )


def listen(id: str, address: str) -> Request:
    return Request("promise.register_listener", "c", PromiseRegisterListenerRequest(id, address))


def get(id: str) -> Request:
    return Request("promise.get", "c", PromiseGetRequest(id))


def task_create_breaking_a_check(id: str) -> Request:
    """A task.create the doors would refuse (ttl < 1): the promise and its timeout are
    written before the task row violates ``CHECK (ttl >= 0)``."""
    action = CreateAction(
        "promise.create",
        None,
        PromiseCreateRequest(id, 100_000, Value(), {"resonate:target": TARGET}),
    )
    return Request("task.create", "c", TaskCreateRequest("w", -1, action))


def promise(id: str, state: PromiseState = PromiseState.PENDING) -> PromiseRecord:
    settled_at = None if state == PromiseState.PENDING else 1
    return PromiseRecord(id, state, Value(), Value(), {}, 10_000, 0, settled_at)


# -- the SQLite writer, held ----------------------------------------------------------------


async def hold_writer(service: SqliteService) -> threading.Event:
    """Keep the writer busy until the returned event is set, so requests queue behind it:
    one write's commit waits in the commit thread behind a blocked job."""
    started, release = threading.Event(), threading.Event()

    def block() -> None:
        started.set()
        release.wait(10)

    service._writer.commit_thread.run(block)
    assert started.wait(10)
    service._writer.submit(lambda store: None)
    await asyncio.sleep(0)  # its batch begins, and its commit queues behind ``block``
    return release


async def submitted(requests: list[Request], service: Service) -> list[asyncio.Task[Reply]]:
    tasks = [asyncio.ensure_future(service.handle(request, 0)) for request in requests]
    await asyncio.sleep(0)  # one loop turn: every handle() queues its job
    return tasks


# -- the backends ---------------------------------------------------------------------------


class SqliteBackend:
    name = "sqlite"
    check_violation: type[Exception] = sqlite3.IntegrityError

    def __init__(self, path: Path) -> None:
        self.path = path
        self.target = str(path)  # what ``tests/storage/hammer.py`` opens

    def service(self, retry_timeout: int = R) -> SqliteService:
        return SqliteService(str(self.path), retry_timeout=retry_timeout)

    def transact(self, work: Callable[[SqlStore[Any]], T]) -> T:
        """Run ``work`` on the store in one committed write transaction: state the handlers
        would not produce, written (or read) straight through the store."""
        conn = connect(str(self.path))
        try:
            migrate(conn)
            conn.execute("BEGIN")
            value = work(SqliteStore(conn, R))
            conn.execute("COMMIT")
        finally:
            conn.close()
        return value

    @contextlib.contextmanager
    def store(self) -> Iterator[SqliteStore]:
        """A store in a write transaction that is rolled back afterwards."""
        conn = connect(str(self.path))
        try:
            migrate(conn)
            conn.execute("BEGIN")
            yield SqliteStore(conn, R)
            conn.execute("ROLLBACK")
        finally:
            conn.close()

    async def together(self, service: Service, requests: list[Request]) -> list[Any]:
        """Each request's reply or exception, the requests sent at once: on SQLite they
        queue behind a held writer, so they run in one group-commit batch."""
        assert isinstance(service, SqliteService)
        release = await hold_writer(service)
        tasks = await submitted(requests, service)
        release.set()
        return await asyncio.gather(*tasks, return_exceptions=True)

    async def listening(self, service: Service) -> None:
        """Until ``outbox_changed`` reports every commit (at once, on SQLite)."""

    def check_integrity(self) -> None:
        conn = connect(str(self.path))
        try:
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        finally:
            conn.close()


class PostgresBackend:
    name = "pg"
    check_violation: type[Exception] = psycopg.errors.CheckViolation

    def __init__(self, url: str) -> None:
        self.url = url
        self.target = url

    def service(self, retry_timeout: int = R) -> PostgresService:
        return PostgresService(self.url, retry_timeout=retry_timeout)

    def transact(self, work: Callable[[SqlStore[Any]], T]) -> T:
        with pg_connect(self.url) as conn:
            pg_migrate(conn)
            value, _ = attempt(conn, work, R, write=True)
        return value

    @contextlib.contextmanager
    def store(self) -> Iterator[PostgresStore]:
        """A store in a write transaction (taking object locks) that is rolled back
        afterwards."""
        with pg_connect(self.url) as conn:
            pg_migrate(conn)
            conn.execute("BEGIN")
            yield PostgresStore(conn, R, locking=True)
            conn.execute("ROLLBACK")

    async def together(self, service: Service, requests: list[Request]) -> list[Any]:
        """Each request's reply or exception, the requests sent at once (each in a
        transaction of its own, concurrently)."""
        return await asyncio.gather(
            *(service.handle(request, 0) for request in requests), return_exceptions=True
        )

    async def listening(self, service: Service) -> None:
        """Until the service's NOTIFY listener listens: it reports once it does."""
        changed = service.outbox_changed()
        await asyncio.wait_for(changed.wait(), 5)
        changed.clear()

    def check_integrity(self) -> None:
        """Nothing to check beyond what PostgreSQL enforces on every commit."""


Backend = SqliteBackend | PostgresBackend
