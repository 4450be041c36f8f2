"""An idle server with a backlog, in figures: ``python bench/idle.py [--sizes N,...]
[--pg URL] [--no-sqlite] [--seconds S] [--retry-timeout MS] [--src PATH]``.

For each backend (a fresh SQLite file; a fresh database of the PostgreSQL cluster that
``--pg`` or ``TROTH_TEST_PG_URL`` names) and each size N (default 2,000, 20,000 and
200,000): a ``troth serve`` at its defaults (retry timeout 5 s) is given N promises whose
tasks target ``poll://any@nobody``, a group no worker ever connects to. They are created a
hundred per ``task.fences`` request, by three clients at once, each under a root task it
holds (``tests.support.backlog``). Once every task's first retry has come due and the
timeouts loop has nothing overdue (``troth_timeouts_lag_seconds`` is 0: the first firing
of each retry, once per task, is behind it), the server's CPU share of one core over
``--seconds`` (default 15) is read from ``/proc/<pid>/stat`` (utime + stime). Then one SSE
worker connects to the group and reads the whole backlog (up to ``--drain-max`` tasks):
the rate it arrives at, against the rate at which the server wrote it.
``--retry-timeout`` serves with another ``--tasks-retry-timeout`` (an hour: no retry
during the run, the delivery loop's rate alone, as ``bench/delivery.py`` measures it).

``--src PATH`` serves another tree's ``src`` (an older checkout, say ``git archive <rev>
src | tar -x -C /tmp/old``) with the same harness, for a before/after in one session.
Compare figures from one run: the machine is shared.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the test harness: one way to start and drive troth serve

from tests.support.backlog import create_backlog, wait_caught_up  # noqa: E402
from tests.support.load import cpu_seconds  # noqa: E402
from tests.support.servers import TrothServer  # noqa: E402
from tests.support.sse import SseClient  # noqa: E402

GROUP = "nobody"


def cpu_shares(pids: list[int], seconds: float) -> list[float]:
    """Each process's CPU share of one core over the next ``seconds``."""
    before, at = [cpu_seconds(pid) for pid in pids], time.monotonic()
    time.sleep(seconds)
    elapsed = time.monotonic() - at
    return [(cpu_seconds(pid) - b) / elapsed for pid, b in zip(pids, before, strict=True)]


def backends_of(url: str) -> list[int]:
    """The PostgreSQL backends serving database ``url`` (the server's pool and listener),
    when the cluster runs on this machine: what the server's queries cost the database."""
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
    return [pid for (pid,) in rows if Path(f"/proc/{pid}/stat").exists()]


def drain(server: TrothServer, n: int) -> float:
    """Connect one worker to the group and read ``n`` distinct executes; messages a second."""
    client = SseClient(server.port, GROUP, "w1")
    try:
        started = time.monotonic()
        seen: set[str] = set()
        while len(seen) < n:
            seen.add(client.message(timeout=60)["data"]["task"]["id"])
        return n / (time.monotonic() - started)
    finally:
        client.close()


@contextlib.contextmanager
def database(backend: str, folder: Path, pg: str | None, name: str) -> Iterator[str]:
    if backend == "sqlite":
        yield str(folder / f"{name}.db")
        return
    from tests.support.postgres import fresh_database

    assert pg is not None
    with fresh_database(pg, "troth_idle") as url:
        yield url


def measure(backend: str, n: int, args: argparse.Namespace, folder: Path) -> None:
    name = f"{backend}-{n}"
    env = {"PYTHONPATH": str(Path(args.src).resolve())}
    with database(backend, folder, args.pg, name) as db:
        flags = ("--tasks-retry-timeout", str(args.retry_timeout))
        server = TrothServer(db, folder / f"{name}.log", flags, env).start()
        try:
            assert server.process is not None
            written = create_backlog(server.url, n, f"poll://any@{GROUP}")
            # A retry period far beyond the run: no retry comes due in it, nothing to wait for.
            first_retries = args.retry_timeout / 1000 if args.retry_timeout <= 60_000 else 0
            caught_up = wait_caught_up(server.url, first_retries, timeout=args.catch_up_max)
            database_pids = backends_of(db) if backend == "postgres" else []
            share, *db_shares = cpu_shares([server.process.pid, *database_pids], args.seconds)
            rate = drain(server, n) if n <= args.drain_max else None
        finally:
            server.close()
    line = (
        f"{backend:8} {n:>8,} tasks: idle CPU {share:6.1%} of a core over {args.seconds:.0f} s"
        f" (created at {written:,.0f}/s; "
        + ("never caught up" if caught_up is None else f"caught up {caught_up:.0f} s after")
        + ")"
    )
    if db_shares:
        line += f"; its {len(db_shares)} database backends {sum(db_shares):.1%}"
    if rate is not None:
        line += f"; a worker then reads it at {rate:,.0f}/s ({rate / written:.2f}× the create rate)"
    print(line, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="2000,20000,200000")
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--pg", default=os.environ.get("TROTH_TEST_PG_URL"))
    parser.add_argument("--no-sqlite", action="store_true")
    parser.add_argument("--src", default=str(ROOT / "src"), help="the troth tree to serve")
    parser.add_argument(
        "--retry-timeout", type=int, default=5000, help="ms (troth serve's default: 5000)"
    )
    parser.add_argument(
        "--catch-up-max",
        type=float,
        default=600,
        help="s to wait for the timeouts loop to have nothing overdue (then measure anyway)",
    )
    parser.add_argument(
        "--drain-max", type=int, default=20_000, help="read the backlog back up to this size"
    )
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    backends = ([] if args.no_sqlite else ["sqlite"]) + (["postgres"] if args.pg else [])
    src = Path(args.src).resolve()
    print(f"troth serve from {src}, --tasks-retry-timeout {args.retry_timeout} ms", flush=True)
    with tempfile.TemporaryDirectory(prefix="troth-bench-idle-") as tmp:
        for backend in backends:
            for n in sizes:
                measure(backend, n, args, Path(tmp))


if __name__ == "__main__":
    main()
