"""The server benchmark on PostgreSQL: ``python bench/server_pg.py [--quick] [--url URL]``.

In one run, on this machine, against one PostgreSQL cluster (``--url``, any database of it;
without one, ``scripts/pg-cluster.sh start`` provides a local throwaway cluster), it measures

1. ``troth serve --db postgresql://…`` with **1 server** and with **3 servers** sharing one
   database, for promise create+settle and task create+fulfill at 1 and 64 concurrent
   clients (closed loop, one request in flight per client; the clients' connections are
   spread round-robin over the servers, from client processes of their own);
2. the raw PostgreSQL rate for the same transaction shape: the statements the real store
   sends for one create+settle (recorded by running ``transaction.attempt`` on a recording
   connection), replayed with fresh ids and lock keys, one transaction per request, in
   pipeline mode with a sync exactly where the store waits for a result, from 1, 10, 30
   and 64 concurrent connections (10 and 30: the servers' pools, ``--pg-pool-size`` × 1
   and × 3);

and prints one table and the ratios. Each part runs on a fresh database of its own
(``CREATE DATABASE``), dropped at the end. Figures on a small shared machine are noisy:
compare ratios from one run, not absolute numbers across runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import multiprocessing
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import loadgen
import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from server import Served, _free_port, promise_op, task_op

ROOT = Path(__file__).resolve().parent.parent
SHAPE_ID = "raw-shape-id"

# -- the database ----------------------------------------------------------------------------


def cluster_url() -> str:
    script = ROOT / "scripts" / "pg-cluster.sh"
    done = subprocess.run([str(script), "start"], check=True, capture_output=True, text=True)
    return done.stdout.strip()


@contextlib.contextmanager
def fresh_database(url: str, name: str) -> Iterator[str]:
    """A new empty database on ``url``'s cluster; its URL. Dropped on exit."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield _with_dbname(url, name)
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def _with_dbname(url: str, name: str) -> str:
    """``url`` (a postgresql:// URL, as ``troth serve --db`` wants one) on database ``name``."""
    params = conninfo_to_dict(url)
    params["dbname"] = name
    user = params.pop("user", "")
    password = params.pop("password", "")
    host = params.pop("host", "127.0.0.1")
    port = params.pop("port", "5432")
    auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    rest = "&".join(f"{k}={v}" for k, v in params.items() if k != "dbname")
    return f"postgresql://{auth}{host}:{port}/{name}" + (f"?{rest}" if rest else "")


def postgres_cpu() -> Callable[[], float] | None:
    """CPU seconds of the local cluster's processes (postmaster and its children), when the
    cluster is ``scripts/pg-cluster.sh``'s; else None."""
    pidfile = Path(os.environ.get("TROTH_PG_DIR", "/tmp/troth-pg-cluster")) / "data"
    pidfile /= "postmaster.pid"
    try:
        postmaster = int(pidfile.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    tick = os.sysconf("SC_CLK_TCK")
    # Backends come and go with their connections: one that exited keeps the CPU it was
    # last seen with, so the total never falls.
    seen: dict[tuple[int, str], float] = {}

    def total() -> float:
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            pid, ppid = int(entry.name), int(fields[1])
            if pid == postmaster or ppid == postmaster:
                # Keyed with the start time too: a pid may be reused.
                seen[(pid, fields[19])] = (int(fields[11]) + int(fields[12])) / tick
        return sum(seen.values())

    return total


# -- load over several servers ------------------------------------------------------------


Op = Callable[[int, str], Awaitable[tuple[list[float], int]]]


async def _timed(
    one: Op, connections: int, prefix: str, barrier: Any, duration: float, warmup: int
) -> loadgen.Result:
    """Closed loops over ``connections``: ``one(index, name)`` runs one operation on
    connection ``index`` and answers its latencies and errors. Every connection first runs
    ``warmup`` operations; then the process waits at ``barrier`` for the other client
    processes and the parent, so the timed window starts when all are warm (the parent
    meets the barrier three times: window open, window closed, connections may close)."""

    async def warm(index: int) -> None:
        for n in range(warmup):
            await one(index, f"{prefix}w{index}.{n}")

    await asyncio.gather(*(warm(i) for i in range(connections)))
    await asyncio.get_running_loop().run_in_executor(None, barrier.wait, 600)
    result = loadgen.Result()
    cpu = time.process_time()
    stop_at = time.perf_counter() + duration

    async def worker(index: int) -> None:
        n = 0
        while time.perf_counter() < stop_at:
            latencies, errors = await one(index, f"{prefix}{index}.{n}")
            n += 1
            result.errors += errors
            if time.perf_counter() <= stop_at:  # operations that ended inside the window
                result.latencies += latencies
                result.operations += 1

    await asyncio.gather(*(worker(i) for i in range(connections)))
    result.cpu = time.process_time() - cpu
    # The window has closed everywhere, and the parent has read its probes before anyone
    # closes a connection (a database backend that exits takes its CPU count with it).
    await asyncio.get_running_loop().run_in_executor(None, barrier.wait, 600)
    await asyncio.get_running_loop().run_in_executor(None, barrier.wait, 600)
    return result


async def _drive(
    ports: list[int],
    first: int,
    connections: int,
    scenario: loadgen.Scenario,
    prefix: str,
    barrier: Any,
    duration: float,
    warmup: int,
) -> loadgen.Result:
    """Like ``loadgen._drive``, but connection ``j`` goes to
    ``ports[(first + j) % len(ports)]``, and the window opens at ``barrier``."""
    loop = asyncio.get_running_loop()
    clients: list[loadgen._Client] = []
    for j in range(connections):
        port = ports[(first + j) % len(ports)]
        _, client = await loop.create_connection(
            lambda: loadgen._Client("127.0.0.1"), "127.0.0.1", port
        )
        clients.append(client)

    async def one(index: int, name: str) -> tuple[list[float], int]:
        latencies, errors = [], 0
        for body in scenario(name):
            sent = time.perf_counter()
            status, reply = await clients[index].post(body)
            latencies.append(time.perf_counter() - sent)
            if status != 200:
                errors += 1
                print(f"server_pg: status {status}: {reply[:200]!r}", flush=True)
        return latencies, errors

    result = await _timed(one, connections, prefix, barrier, duration, warmup)
    for client in clients:
        assert client.transport is not None
        client.transport.close()
    return result


def _run_child(out: multiprocessing.Queue, target: Callable[..., Any], args: tuple) -> None:
    try:
        import uvloop

        runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
    except ImportError:
        runner = asyncio.Runner()
    with runner:
        try:
            out.put(runner.run(target(*args)))
        except BaseException as error:
            out.put(RuntimeError(f"client process failed: {error!r}"))
            raise


def closed_loop(
    target: Callable[..., Any],
    per_process_args: Callable[[int, int, int, Any], tuple],
    connections: int,
    processes: int,
    duration: float,
    probes: Sequence[Callable[[], float]],
) -> tuple[loadgen.Summary, list[float]]:
    """Run ``target(*per_process_args(p, first, share, barrier))`` in ``processes``
    processes sharing ``connections``; summarise like ``loadgen.run``, with the change per
    second of each of ``probes`` over the timed window."""
    processes = max(1, min(processes, connections))
    ctx = multiprocessing.get_context("spawn")
    out: multiprocessing.Queue = ctx.Queue()
    barrier = ctx.Barrier(processes + 1)
    children = []
    first = 0
    for p in range(processes):
        share = connections // processes + (1 if p < connections % processes else 0)
        args = per_process_args(p, first, share, barrier)
        first += share
        child = ctx.Process(target=_run_child, args=(out, target, args), daemon=True)
        child.start()
        children.append(child)
    barrier.wait(600)  # every connection is warm: the window opens
    opened, before = time.perf_counter(), [probe() for probe in probes]
    barrier.wait(600)  # every client process has finished its window
    window = time.perf_counter() - opened
    probed = [(probe() - b) / window for probe, b in zip(probes, before, strict=True)]
    barrier.wait(600)  # the clients may close their connections
    results = [out.get(timeout=duration + 180) for _ in children]
    for child in children:
        child.join()
    for result in results:
        if isinstance(result, Exception):
            raise result
    latencies = sorted(lat for r in results for lat in r.latencies)

    def percentile(q: float) -> float:
        if not latencies:
            return float("nan")
        return 1000 * latencies[min(len(latencies) - 1, int(q * len(latencies)))]

    summary = loadgen.Summary(
        connections=connections,
        processes=processes,
        seconds=duration,
        operations=sum(r.operations for r in results),
        round_trips=len(latencies),
        errors=sum(r.errors for r in results),
        p50_ms=percentile(0.50),
        p99_ms=percentile(0.99),
        client_cpu=sum(r.cpu for r in results) / duration,
        probed=0.0,
    )
    return summary, probed


# -- raw PostgreSQL -----------------------------------------------------------------------

# One request's transaction: ("x", sql, params) sends a statement, ("f", i) waits for the
# result of the request's i-th statement (a pipeline sync, as the store's fetch is).
Step = tuple


class _Recorder:
    """Stands in for the store's connection and notes every statement and every wait."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn
        self.steps: list[Step] = []
        self._sent = 0

    def execute(self, query: Any, params: Any = None) -> Any:
        self.steps.append(("x", query, params))
        index = self._sent
        self._sent += 1
        return _RecordedCursor(self, index, self.conn.execute(query, params))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)


class _RecordedCursor:
    def __init__(self, recorder: _Recorder, index: int, cursor: psycopg.Cursor) -> None:
        self._recorder, self._index, self._cursor = recorder, index, cursor

    def _waited(self) -> None:
        self._recorder.steps.append(("f", self._index))

    def fetchone(self) -> Any:
        self._waited()
        return self._cursor.fetchone()

    def fetchall(self) -> Any:
        self._waited()
        return self._cursor.fetchall()


def record_shape(url: str) -> list[list[Step]]:
    """The transactions the real store runs for promise create and settle of a new id."""
    from troth.engine import handle
    from troth.protocol.envelope import decode_request
    from troth.storage.postgres import connection, schema
    from troth.storage.postgres.transaction import attempt

    shape = []
    with connection.connect(url, lock_timeout=5000) as conn:
        schema.migrate(conn)
        for body in promise_op(SHAPE_ID):
            recorder = _Recorder(conn)
            work = functools.partial(
                handle, request=decode_request(body), now=int(time.time() * 1000)
            )
            reply, _ = attempt(recorder, work, 5000, write=True)  # type: ignore[arg-type]
            assert reply.status == 200, reply
            shape.append(recorder.steps)
    return shape


def _fresh(value: Any, new: str, keys: dict[int, int]) -> Any:
    """``value`` of the recorded id made of id ``new``: in text, and as an object lock key."""
    if isinstance(value, str):
        return value.replace(SHAPE_ID, new)
    if isinstance(value, int) and value in keys:
        return keys[value]
    if isinstance(value, tuple | list):
        return type(value)(_fresh(v, new, keys) for v in value)
    if isinstance(value, dict):
        return {k: _fresh(v, new, keys) for k, v in value.items()}
    return value


async def _replay(
    url: str,
    shape: list[list[Step]],
    prefix: str,
    connections: int,
    barrier: Any,
    duration: float,
    warmup: int,
) -> loadgen.Result:
    """Closed loop over ``connections``: each replays create+settle transactions of ids of
    its own; a latency per transaction (the server's round trip holds one)."""
    from troth.storage.postgres import locks

    conns = []
    for _ in range(connections):
        conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
        conn.prepare_threshold = None  # as the server's connections
        conns.append(conn)

    async def one(index: int, new: str) -> tuple[list[float], int]:
        conn = conns[index]
        keys = {locks.key(ns, SHAPE_ID): locks.key(ns, new) for ns in locks.Namespace}
        latencies = []
        for steps in shape:
            sent = time.perf_counter()
            cursors: list[Any] = []
            async with conn.pipeline():
                for step in steps:
                    if step[0] == "x":
                        cursors.append(await conn.execute(step[1], _fresh(step[2], new, keys)))
                    else:
                        await cursors[step[1]].fetchall()
            latencies.append(time.perf_counter() - sent)
        return latencies, 0

    result = await _timed(one, connections, prefix, barrier, duration, warmup)
    for conn in conns:
        await conn.close()
    return result


# -- the run --------------------------------------------------------------------------------

WORKLOADS = (("promise create+settle", promise_op), ("task create+fulfill", task_op))


@contextlib.contextmanager
def serve(url: str, count: int, pool_size: int) -> Iterator[list[Served]]:
    """``count`` servers on database ``url``, started one after another (the first
    migrates); stopped on exit."""
    with contextlib.ExitStack() as stack:
        servers = []
        for _ in range(count):
            port = _free_port()
            argv = [sys.executable, "-m", "troth", "serve", "--host", "127.0.0.1"]
            argv += ["--port", str(port), "--db", url, "--log-level", "warning"]
            argv += ["--pg-pool-size", str(pool_size)]
            servers.append(stack.enter_context(Served(argv, port)))
        yield servers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="short runs (about 2 minutes)")
    parser.add_argument("--url", help="a PostgreSQL cluster (any database of it)")
    parser.add_argument("--duration", type=float, help="seconds per measurement [5; quick 2]")
    parser.add_argument("--procs", type=int, default=2, help="client processes at 64 conns")
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--pg-pool-size", type=int, default=10, help="per server [10]")
    args = parser.parse_args()
    duration = args.duration or (2.0 if args.quick else 5.0)
    warmup = 10 if args.quick else 30
    levels = (1, args.connections)
    url = args.url or cluster_url()
    pg_cpu = postgres_cpu()
    tag = f"troth_bench_{os.getpid()}"
    rows: list[tuple[str, int, loadgen.Summary, float, float]] = []

    def no_cpu() -> float:
        return 0.0

    db_probe = pg_cpu or no_cpu

    for count in (1, 3):
        name = f"{tag}_{count}s"
        with fresh_database(url, name) as db, serve(db, count, args.pg_pool_size) as servers:
            ports = [s.port for s in servers]
            for label, scenario in WORKLOADS:
                for conns in levels:
                    summary, (server_cpu, db_cpu) = closed_loop(
                        _drive,
                        lambda p, first, share, barrier, sc=scenario, ports=ports: (
                            ports,
                            first,
                            share,
                            sc,
                            f"{os.getpid()}-{time.monotonic_ns()}-{p}-",
                            barrier,
                            duration,
                            warmup,
                        ),
                        conns,
                        args.procs if conns > 1 else 1,
                        duration,
                        (lambda: sum(s.cpu() for s in servers), db_probe),
                    )
                    if summary.errors:
                        print(f"  {summary.errors} requests failed", file=sys.stderr)
                    plural = "s" if count > 1 else ""
                    rows.append(
                        (f"{label}, {count} server{plural}", conns, summary, server_cpu, db_cpu)
                    )
                    print(f"  done: {rows[-1][0]} @{conns}", file=sys.stderr)

    raw_levels = sorted({1, args.pg_pool_size, 3 * args.pg_pool_size, args.connections})
    raw: dict[int, tuple[loadgen.Summary, float]] = {}
    with fresh_database(url, f"{tag}_raw") as db:
        shape = record_shape(db)
        for conns in raw_levels:
            summary, (db_cpu,) = closed_loop(
                _replay,
                lambda p, first, share, barrier, conns=conns: (
                    db,
                    shape,
                    f"r{conns}-{p}-",
                    share,
                    barrier,
                    duration,
                    warmup,
                ),
                conns,
                args.procs if conns > 1 else 1,
                duration,
                (db_probe,),
            )
            raw[conns] = (summary, db_cpu)
            print(f"  done: raw @{conns}", file=sys.stderr)

    print()
    print(
        f"{'workload':<37}{'conns':>6}{'ops/s':>8}{'req/s':>8}{'p50 ms':>8}{'p99 ms':>8}"
        f"{'srv cpu':>9}{'pg cpu':>8}{'client':>8}"
    )
    for label, conns, s, server_cpu, db_cpu in rows:
        print(
            f"{label:<37}{conns:>6}{s.ops_per_s:>8.0f}{s.round_trips_per_s:>8.0f}"
            f"{s.p50_ms:>8.2f}{s.p99_ms:>8.2f}{server_cpu:>9.0%}"
            f"{(f'{db_cpu:.0%}' if pg_cpu else '-'):>8}{s.client_cpu:>8.0%}"
        )
    for conns, (s, db_cpu) in raw.items():
        print(
            f"{'raw PostgreSQL, txn/req':<37}{conns:>6}{s.ops_per_s:>8.0f}"
            f"{s.round_trips_per_s:>8.0f}{s.p50_ms:>8.2f}{s.p99_ms:>8.2f}{'':>9}"
            f"{(f'{db_cpu:.0%}' if pg_cpu else '-'):>8}{s.client_cpu:>8.0%}"
        )
    statements = [sum(step[0] == "x" for step in steps) for steps in shape]
    syncs = [sum(step[0] == "f" for step in steps) + 1 for steps in shape]
    print(
        f"  raw: the store's statements for create ({statements[0]}, {syncs[0]} round trips)"
        f" and settle ({statements[1]}, {syncs[1]} round trips), replayed in pipeline mode,"
        " one transaction (one commit) per request"
    )
    print(
        "  ops/s: create+settle (or create+fulfill) pairs; req/s: round trips (raw:"
        " transactions), 2 per op"
    )
    print(
        f"  srv cpu: all servers' processes, share of one core; pg cpu: PostgreSQL's; "
        f"pool {args.pg_pool_size} connections per server; {os.cpu_count()} cores"
    )

    print()
    peak = max(r.ops_per_s for r, _ in raw.values())
    for label, conns, s, _, _ in rows:
        count = int(label.rsplit(", ", 1)[1].split()[0])
        # The database connections the servers can use at once: one per client, at most
        # the pools' size.
        held = min(conns, count * args.pg_pool_size)
        print(
            f"{label} @{conns}: {s.ops_per_s / max(raw[held][0].ops_per_s, 1e-9):.0%} of raw at the"
            f" {held} connection(s) the server{'s' * (count > 1)} hold,"
            f" {s.ops_per_s / max(raw[conns][0].ops_per_s, 1e-9):.0%} of raw at {conns},"
            f" {s.ops_per_s / peak:.0%} of the best raw rate"
        )
    for label, _ in WORKLOADS:
        for conns in levels:
            one = next(
                r[2]
                for r in rows
                if r[0].startswith(label) and r[1] == conns and "1 server" in r[0]
            )
            three = next(
                r[2]
                for r in rows
                if r[0].startswith(label) and r[1] == conns and "3 servers" in r[0]
            )
            print(
                f"{label} @{conns}: 3 servers / 1 server = {three.ops_per_s / one.ops_per_s:.2f}x"
            )


if __name__ == "__main__":
    main()
