"""The views' reads on every backend: the executions list (roots with a task, newest
first, every filter, pages that resume where they stopped, along the indexes of the
views' migration) and an execution's promises (its subtree, nothing of another's)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import pytest

from tests.support.storage import TARGET, Backend
from troth.protocol.conventions import FUNC_TAG
from troth.protocol.envelope import Request
from troth.protocol.records import BRANCH, ORIGIN, PARENT, SettleState, TaskState, Value
from troth.protocol.requests import PromiseCreateRequest, PromiseSettleRequest, TaskHaltRequest
from troth.storage.postgres import PostgresService
from troth.storage.postgres import migrate as pg_migrate
from troth.storage.postgres.connection import connect as pg_connect
from troth.storage.postgres.schema import MIGRATIONS as PG_MIGRATIONS
from troth.storage.service import Service
from troth.storage.sql.dialect import POSTGRES, SQLITE
from troth.storage.sql.views import executions_query
from troth.storage.sqlite import SqliteService
from troth.storage.sqlite import connect as sqlite_connect
from troth.storage.sqlite import migrate as sqlite_migrate
from troth.storage.sqlite.schema import MIGRATIONS as SQLITE_MIGRATIONS
from troth.views.executions import Cursor, ExecutionQuery


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(coro)


def lineage(id: str, root: str, parent: str) -> dict[str, str]:
    return {ORIGIN: root, PARENT: parent, BRANCH: id}


async def send(service: Service, kind: str, data: Any, now: int = 0) -> None:
    reply = await service.handle(Request(kind, "c", data), now)
    assert reply.status in (200, 201), (kind, data, reply)


async def execution(service: Service, id: str, at: int, tags: dict[str, str] | None = None) -> None:
    """A root as troth starts one (its own lineage, a target, so a task), created at ``at``."""
    tags = {**lineage(id, id, id), "resonate:target": TARGET, **(tags or {})}
    await send(service, "promise.create", PromiseCreateRequest(id, 10**9, Value(), tags), at)


async def child(service: Service, id: str, root: str, parent: str, at: int, **extra: str) -> None:
    tags = {**lineage(id, root, parent), **extra}
    await send(service, "promise.create", PromiseCreateRequest(id, 10**9, Value(), tags), at)


async def all_pages(service: Service, query: ExecutionQuery) -> list[list[str]]:
    pages: list[list[str]] = []
    cursor: Cursor | None = None
    while True:
        page = await service.executions(ExecutionQuery(**{**vars(query), "cursor": cursor}))
        pages.append([e.id for e in page.executions])
        if page.next is None:
            return pages
        cursor = page.next


def test_executions_are_roots_with_tasks_newest_first_in_pages(backend: Backend) -> None:
    async def scenario() -> None:
        service = backend.service()
        for n in range(25):
            await execution(service, f"e{n:02}", 1000 + n // 2)  # pairs share an instant
            await child(
                service, f"e{n:02}:0", f"e{n:02}", f"e{n:02}", 2000, **{"resonate:target": TARGET}
            )  # an rpc child: a task, not a root
        plain = PromiseCreateRequest("plain", 10**9, Value(), {})  # a promise, no task
        await send(service, "promise.create", plain, 3000)
        official = PromiseCreateRequest("ts", 10**9, Value(), {"resonate:target": TARGET})
        await send(service, "promise.create", official, 3000)  # no lineage tags at all

        pages = await all_pages(service, ExecutionQuery(limit=10))
        assert [len(p) for p in pages] == [10, 10, 6]
        ids = [id for page in pages for id in page]
        assert ids == [
            "ts",
            *(f"e{n:02}" for n in reversed(range(25))),
        ]
        await service.close()

    run(scenario())


def test_every_filter_of_the_executions_list(backend: Backend) -> None:
    async def scenario() -> None:
        service = backend.service()
        await execution(service, "a", 100, {FUNC_TAG: "checkout", "tenant": "acme"})
        await execution(service, "b", 200, {FUNC_TAG: "checkout"})
        await execution(service, "c", 300, {FUNC_TAG: "refund", "tenant": "acme"})
        await execution(service, "d", 400)
        await send(service, "promise.settle", PromiseSettleRequest("b", SettleState.RESOLVED), 500)
        await send(service, "task.halt", TaskHaltRequest("c"), 500)

        async def ids(**query: Any) -> list[str]:
            page = await service.executions(ExecutionQuery(**query))
            return [e.id for e in page.executions]

        assert await ids() == ["d", "c", "b", "a"]
        assert await ids(function="checkout") == ["b", "a"]
        assert await ids(state="resolved") == ["b"]
        assert await ids(state="pending") == ["d", "c", "a"]
        assert await ids(state="halted") == ["c"]
        assert await ids(tag=("tenant", "acme")) == ["c", "a"]
        assert await ids(since_ms=200, until_ms=400) == ["c", "b"]
        assert await ids(function="checkout", state="pending", since_ms=50) == ["a"]
        rows = {e.id: e for e in (await service.executions(ExecutionQuery())).executions}
        assert (rows["c"].state, rows["c"].function) == ("halted", "refund")
        assert (rows["b"].state, rows["b"].settled_on) == ("resolved", 500)
        await service.close()

    run(scenario())


def test_family_is_the_subtree_of_one_execution(backend: Backend) -> None:
    async def scenario() -> None:
        service = backend.service()
        await execution(service, "r", 1)
        await child(service, "r:0", "r", "r", 2)
        await child(service, "r:1", "r", "r", 3, **{"resonate:target": TARGET})
        await child(service, "r:1.0", "r", "r:1", 4)
        await child(service, "r:10", "r", "r", 5)
        await execution(service, "r2", 6)  # shares a prefix of the id, not the tree
        await child(service, "r2:0", "r2", "r2", 7)

        assert [p.id for p in await service.family("r")] == ["r", "r:0", "r:1", "r:1.0", "r:10"]
        assert [p.id for p in await service.family("r:1")] == ["r:1", "r:1.0"]
        assert await service.family("nothing") == []
        await send(service, "task.halt", TaskHaltRequest("r:1"), 8)
        ids = [p.id for p in await service.family("r")]
        assert await service.tasks(ids) == {"r": TaskState.PENDING, "r:1": TaskState.HALTED}
        await service.close()

    run(scenario())


def test_the_executions_list_reads_along_the_views_indexes(backend: Backend) -> None:
    """No page reads the whole promises table: each filter's query walks an index of the
    views' migration (or the halted tasks' index)."""
    dialect = SQLITE if backend.__class__.__name__.startswith("Sqlite") else POSTGRES
    explain = "EXPLAIN QUERY PLAN " if dialect is SQLITE else "EXPLAIN "
    expected = {
        ExecutionQuery(): "promises_roots",
        ExecutionQuery(cursor=Cursor(5, "x")): "promises_roots",
        ExecutionQuery(state="pending", cursor=Cursor(5, "x")): "promises_roots_by_state",
        ExecutionQuery(function="f"): "promises_roots_by_func",
        ExecutionQuery(state="halted"): "tasks_by_state",
    }
    run(backend.service().close())  # migrated

    def plans(store: Any) -> dict[ExecutionQuery, str]:
        if dialect is POSTGRES:
            store.conn.execute("SET LOCAL enable_seqscan = off")  # an empty table: force
        found = {}
        for query in expected:
            sql, args = executions_query(dialect, query)
            rows = store.conn.execute(explain + sql, args).fetchall()
            found[query] = " | ".join(str(row[-1] if dialect is SQLITE else row[0]) for row in rows)
        return found

    for query, plan in backend.transact(plans).items():
        assert expected[query] in plan, (query, plan)
        assert not re.search(r"SCAN p(?! USING)|Seq Scan on promises", plan), plan


_OLD_ROOT = (
    "INSERT INTO promises (id, state, param, value, tags, timeout_at, created_at)"
    " VALUES ('old', 'pending', '{}', '{}', ?, 1000000, 5)"
)
_OLD_TASK = "INSERT INTO tasks (id, state, version, resumes) VALUES ('old', 'pending', 0, '[]')"
_OLD_TAGS = json.dumps({**lineage("old", "old", "old"), FUNC_TAG: "legacy"})


async def listed(service: Service) -> list[tuple[str, str | None]]:
    page = await service.executions(ExecutionQuery(function="legacy"))
    return [(e.id, e.function) for e in page.executions]


def test_the_views_migration_indexes_what_an_older_sqlite_file_holds(tmp_path: Path) -> None:
    path = str(tmp_path / "old.db")
    conn = sqlite_connect(path)
    sqlite_migrate(conn, SQLITE_MIGRATIONS[:2])  # the file as the release before the views
    conn.execute(_OLD_ROOT, (_OLD_TAGS,))
    conn.execute(_OLD_TASK)
    conn.close()

    async def scenario() -> None:
        service = SqliteService(path)
        assert await listed(service) == [("old", "legacy")]
        await service.close()

    run(scenario())


@pytest.mark.pg
def test_the_views_migration_indexes_what_an_older_postgres_database_holds(
    fresh_url: str,
) -> None:
    with pg_connect(fresh_url) as conn:
        pg_migrate(conn, PG_MIGRATIONS[:2])
        conn.execute(_OLD_ROOT.replace("?", "%s"), (_OLD_TAGS,))
        conn.execute(_OLD_TASK)

    async def scenario() -> None:
        service = PostgresService(fresh_url)
        assert await listed(service) == [("old", "legacy")]
        await service.close()

    run(scenario())
