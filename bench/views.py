"""The views benchmark: ``python bench/views.py [--executions N] [--nodes N] [--pg URL]``.

It measures the two figures issue 14 asks for, on a fresh SQLite file (and, with ``--pg``,
on a fresh PostgreSQL schema too):

1. ``troth tree`` on one execution of ``--nodes`` promises (default 1,000: a root, steps
   each with a value, a failed attempt every tenth step): the command run in-process as a
   user runs it (``troth tree ID --db FILE``, which reads the call tree along the origin
   index, builds it and draws it with rich), best and median of several runs; and the
   whole ``troth`` process, interpreter start included, beside ``troth --version`` (the
   start alone), best of three;
2. the executions list paged through ``--executions`` executions (default 100,000), 100
   per page from the first page to the last, through the storage ``Views`` the API and the
   CLI read: the time of the first and the last pages and of every page on average, and
   the query plan of a page past the first, to show it reads the views' index from where
   the last page stopped rather than scanning.

The data is written through the engine (``promise.create`` with a target, so each root has
its task, exactly as the SDK starts an execution), with ``synchronous=OFF`` to set up fast;
the reads are then measured on the same file.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from troth.cli import main as troth
from troth.protocol.conventions import ATTEMPT_TAG, FUNC_TAG, STEP_TAG, attempt_id
from troth.protocol.envelope import Request
from troth.protocol.records import BRANCH, ORIGIN, PARENT, TARGET, SettleState
from troth.protocol.requests import PromiseCreateRequest, PromiseSettleRequest
from troth.storage.service import Service
from troth.storage.sql.dialect import POSTGRES, SQLITE, Dialect
from troth.storage.sql.views import executions_query
from troth.views.executions import Cursor, ExecutionQuery
from troth.views.values import json_value

FAR = 10**13
PAGE = 100
BATCH = 500


async def send(service: Service, kind: str, data: Any, now: int) -> None:
    reply = await service.handle(Request(kind, "b", data), now)
    assert reply.status in (200, 201), reply


async def together(service: Service, requests: list[tuple[str, Any, int]]) -> None:
    for start in range(0, len(requests), BATCH):
        batch = requests[start : start + BATCH]
        await asyncio.gather(*(send(service, *request) for request in batch))


def lineage(id: str, root: str, parent: str) -> dict[str, str]:
    return {ORIGIN: root, PARENT: parent, BRANCH: id}


async def one_big_execution(service: Service, root: str, nodes: int) -> None:
    """A root and ``nodes - 1`` promises below it: steps with values, and a failed attempt
    (a child of its step) every tenth step."""
    tags = {**lineage(root, root, root), TARGET: "poll://any@bench", FUNC_TAG: "fan_out"}
    create = PromiseCreateRequest(root, FAR, json_value({"func": "fan_out", "args": []}), tags)
    await send(service, "promise.create", create, 1)
    requests: list[tuple[str, Any, int]] = []
    n = 0
    while len(requests) // 2 < nodes - 1:
        step = f"{root}:{n}"
        step_tags = {**lineage(step, root, root), STEP_TAG: "run:part"}
        requests.append(
            ("promise.create", PromiseCreateRequest(step, FAR, json_value(n), step_tags), 2 + n)
        )
        requests.append(
            (
                "promise.settle",
                PromiseSettleRequest(step, SettleState.RESOLVED, json_value(n * n)),
                3 + n,
            )
        )
        if n % 10 == 9 and len(requests) // 2 < nodes - 1:
            failed = attempt_id(step, 1)
            failed_tags = {**lineage(failed, root, step), STEP_TAG: "attempt", ATTEMPT_TAG: "1"}
            error = {"__type": "error", "name": "TimeoutError", "message": "upstream slow"}
            requests.append(
                (
                    "promise.create",
                    PromiseCreateRequest(failed, FAR, json_value(1), failed_tags),
                    2 + n,
                )
            )
            requests.append(
                (
                    "promise.settle",
                    PromiseSettleRequest(failed, SettleState.REJECTED, json_value(error)),
                    2 + n,
                )
            )
        n += 1
    creates = [r for r in requests if r[0] == "promise.create"]
    settles = [r for r in requests if r[0] == "promise.settle"]
    await together(service, creates)
    await together(service, settles)


async def many_executions(service: Service, count: int) -> None:
    requests = []
    for n in range(count):
        id = f"order-{n:07}"
        tags = {**lineage(id, id, id), TARGET: "poll://any@bench", FUNC_TAG: "checkout"}
        requests.append(
            ("promise.create", PromiseCreateRequest(id, FAR, json_value([n]), tags), 10_000 + n)
        )
    await together(service, requests)


def time_tree(db: str, root: str, runs: int) -> list[float]:
    """``troth tree ROOT --db DB`` in this process, its output drawn into a buffer."""
    took = []
    for _ in range(runs):
        out = io.StringIO()
        started = time.perf_counter()
        with contextlib.redirect_stdout(out):
            code = troth(["tree", root, "--db", db])
        took.append(time.perf_counter() - started)
        assert code == 0, code
    assert out.getvalue().count(f"{root}:") >= 1, out.getvalue()[:500]
    return took


async def page_through(service: Service, count: int) -> list[float]:
    took: list[float] = []
    cursor: Cursor | None = None
    seen = 0
    while True:
        started = time.perf_counter()
        page = await service.executions(ExecutionQuery(cursor=cursor, limit=PAGE))
        took.append(time.perf_counter() - started)
        seen += len(page.executions)
        if page.next is None:
            break
        cursor = page.next
    assert seen >= count, (seen, count)
    return took


def plan(service: Any, d: Dialect) -> str:
    sql, args = executions_query(
        d, ExecutionQuery(cursor=Cursor(10**9, "order-0050000"), limit=PAGE)
    )
    if d is SQLITE:
        conn = service._reader()
        return " / ".join(row[-1] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, args))
    with service._pool.connection() as conn:
        return " / ".join(row[0].strip() for row in conn.execute("EXPLAIN " + sql, args))


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def report_pages(took: list[float]) -> None:
    first, last = took[:10], took[-10:]
    print(f"  pages: {len(took)} of {PAGE}; first page {ms(took[0])}, last page {ms(took[-1])}")
    print(
        f"  median of the first 10 pages {ms(statistics.median(first))}, "
        f"of the last 10 {ms(statistics.median(last))}, of all {ms(statistics.median(took))}"
    )


async def list_sqlite(db: str, args: argparse.Namespace) -> None:
    from troth.storage.sqlite import SqliteService

    service = SqliteService(db, synchronous="OFF")
    started = time.perf_counter()
    await one_big_execution(service, "big", args.nodes)
    await many_executions(service, args.executions)
    wrote = time.perf_counter() - started
    print(f"SQLite: wrote {args.nodes} + {args.executions} executions in {wrote:.1f} s")
    took = await page_through(service, args.executions)
    report_pages(took)
    print(f"  plan of a page: {plan(service, SQLITE)}")
    await service.close()


def tree_sqlite(db: str, args: argparse.Namespace) -> None:
    tree = time_tree(db, "big", args.runs)
    print(
        f"  troth tree big --db (in-process, {args.nodes} nodes): best {ms(min(tree))}, "
        f"median {ms(statistics.median(tree))} of {args.runs}"
    )
    whole = process_time([sys.executable, "-m", "troth", "tree", "big", "--db", db])
    bare = process_time([sys.executable, "-m", "troth", "--version"])
    print(
        f"  troth tree big --db (a new process, interpreter start included): {ms(whole)};"
        f" troth --version, for the start alone: {ms(bare)}"
    )


def process_time(command: list[str]) -> float:
    """The best of three runs of ``command`` as a new process."""
    took = []
    for _ in range(3):
        started = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        took.append(time.perf_counter() - started)
    return min(took)


async def bench_pg(url: str, args: argparse.Namespace) -> None:
    import psycopg

    from troth.storage.postgres import PostgresService

    schema = f"bench_views_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    joiner = "&" if "?" in url else "?"
    scoped = f"{url}{joiner}options=-csearch_path%3D{schema}"
    try:
        service = PostgresService(scoped)
        started = time.perf_counter()
        await one_big_execution(service, "big", args.nodes)
        await many_executions(service, args.executions)
        print(
            f"PostgreSQL: wrote {args.nodes} + {args.executions} executions in "
            f"{time.perf_counter() - started:.1f} s"
        )
        with psycopg.connect(scoped, autocommit=True) as conn:
            conn.execute("ANALYZE promises; ANALYZE tasks")
        took = await page_through(service, args.executions)
        report_pages(took)
        print(f"  plan of a page: {plan(service, POSTGRES)}")
        tree = []
        for _ in range(args.runs):
            began = time.perf_counter()
            records = await service.family("big")
            await service.tasks([r.id for r in records])
            tree.append(time.perf_counter() - began)
        print(f"  the tree's reads ({len(records)} promises and their tasks): best {ms(min(tree))}")
        await service.close()
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--executions", type=int, default=100_000)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--pg", metavar="URL", help="also on this PostgreSQL database")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        db = str(Path(folder) / "views.db")
        asyncio.run(list_sqlite(db, args))
        tree_sqlite(db, args)
    if args.pg:
        asyncio.run(bench_pg(args.pg, args))


if __name__ == "__main__":
    main()
