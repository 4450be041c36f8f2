"""Soak: steady SDK load on real servers and workers while they are killed, then the audit.

    python bench/soak.py --duration 3600 --backend sqlite      # an hour, by hand
    python bench/soak.py --duration 3600 --backend pg          # two servers on PostgreSQL
    python bench/soak.py --duration 60                         # the short form the tests run

A driver starts workflows at a steady rate on a worker group served by worker processes
(``troth worker``). The workflows mix local steps, durable sleeps, an rpc to a child, an
external promise the driver resolves, and a cron schedule that starts workflows of its own.
Meanwhile, the server is killed with SIGKILL every 20–60 s (scaled down for short runs) and
started again on the same port and data, a worker is killed and replaced every so often,
and with ``--backend pg`` (two servers on one database) the PostgreSQL server is stopped
and started once. A push target that always answers 503 receives a share of the work.

At the end, with the faults over, the audit requires that:

- every workflow the server acknowledged (``handle.started()`` returned) completed, with
  the value its code computes;
- no step started after its result was recorded (each step appends ``start``/``done`` lines
  with wall-clock times to a ledger; a start later than its promise's ``settledAt`` would
  be a finished step run again);
- the server, idle after the run, uses under 2 % of a core and its memory is back near
  where it was after warm-up.

It prints its figures and exits non-zero when any of that fails. PostgreSQL comes from
``TROTH_TEST_PG_URL`` (``scripts/pg-cluster.sh start``); the script stops and starts that
cluster once with ``scripts/pg-cluster.sh down``/``start``, so give it a cluster of its own
(``TROTH_PG_DIR``) when other tests share one.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]

APP = """
import os, time
from datetime import timedelta
from pathlib import Path
from troth import Context, Troth

app = Troth(ttl=timedelta(seconds=5))
LEDGER = Path(os.environ["SOAK_LEDGER"])


def record(event: str, key: str) -> None:
    with LEDGER.open("a") as f:
        f.write(f"{event} {key} {time.time_ns() // 1_000_000}\\n")
        f.flush()
        os.fsync(f.fileno())


def square(key: str, n: int) -> int:
    record("start", key)
    time.sleep(0.05)
    record("done", key)
    return n * n


@app.register
async def child(ctx: Context, n: int) -> int:
    return await ctx.run(square, ctx.id + ":sq", n) + 1


@app.register
async def workflow(ctx: Context, n: int) -> int:
    a = await ctx.run(square, ctx.id + ":a", n)
    await ctx.sleep(0.5)
    b = await ctx.rpc(child, n)
    answer = await ctx.promise(id=ctx.id + ":approval")
    c = await ctx.run(square, ctx.id + ":c", int(answer))
    return a + b + c


@app.register
async def ticker(ctx: Context) -> str:
    await ctx.run(square, ctx.id + ":tick", 1)
    return "tick"
"""


def expected(n: int) -> int:
    return n * n + (n * n + 1) + 4  # approval answer is 2: 2 * 2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class FailingTarget:
    """A push target that answers 503 to everything, on a thread of its own."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                self.send_response(503)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/push"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


class Server:
    """``troth serve`` on a fixed port and data; kill -9 and start again at will."""

    def __init__(self, db: str, log: Path) -> None:
        self.db, self.log, self.port = db, log, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "troth", "serve", "--host", "127.0.0.1",
                 "--port", str(self.port), "--db", self.db, "--tasks-retry-timeout", "2000",
                 "--push-allow", "loopback"],  # its failing push target is on 127.0.0.1
                stdout=log, stderr=log,
            )  # fmt: skip
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/ready", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"server on {self.port} did not start:\n{self.log.read_text()}")

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()

    def usage(self) -> tuple[float, int]:
        """(CPU seconds so far, RSS bytes) of the running process."""
        assert self.process is not None
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        cpu = (int(fields[11]) + int(fields[12])) / ticks
        rss = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        return cpu, rss


class Soak:
    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        self.args, self.work = args, work
        self.rng = random.Random(args.seed)
        self.ledger = work / "ledger"
        (work / "soakapp.py").write_text(textwrap.dedent(APP))
        if args.backend == "pg":
            db = pg_database()
            self.servers = [Server(db, work / f"server{i}.log") for i in range(2)]
        else:
            self.servers = [Server(str(work / "soak.db"), work / "server0.log")]
        self.group = f"soak{secrets.token_hex(3)}"
        self.workers: list[subprocess.Popen[bytes]] = []
        self.target = FailingTarget()
        self.started: dict[str, int] = {}  # workflow id -> n, acknowledged by the server
        self.stats: Counter[str] = Counter()
        self.approvals: set[asyncio.Future[None]] = set()
        self.pushed: list[str] = []  # executions sent to the failing push target

    # -- processes --------------------------------------------------------------------------

    def urls(self) -> str:
        return ",".join(s.url for s in self.servers)

    def start_worker(self) -> None:
        log = open(self.work / f"worker{len(self.workers)}.log", "ab")  # noqa: SIM115
        env = {**os.environ, "TROTH_URL": self.urls(), "TROTH_GROUP": self.group,
               "SOAK_LEDGER": str(self.ledger), "PYTHONPATH": str(self.work)}  # fmt: skip
        command = [sys.executable, "-m", "troth", "worker", "soakapp:app"]
        worker = subprocess.Popen(command, cwd=self.work, env=env, stdout=log, stderr=log)
        self.workers.append(worker)
        log.close()

    def live_workers(self) -> list[subprocess.Popen[bytes]]:
        return [w for w in self.workers if w.poll() is None]

    # -- the run ----------------------------------------------------------------------------

    async def run(self) -> int:
        for server in self.servers:
            server.start()
        for _ in range(2):
            self.start_worker()
        from troth import Troth

        client = Troth(url=self.urls(), group=f"{self.group}-driver")
        cron = client.options(target=self.group).schedules
        await cron.create(f"{self.group}-cron", "*/5 * * * * *", "ticker")
        await asyncio.sleep(3)  # warm-up
        baseline = self.servers[0].usage()[1], self.idle_share()
        end = time.monotonic() + self.args.duration
        faults = asyncio.ensure_future(self.faults(end))
        n = 0
        while time.monotonic() < end:
            n += 1
            await self.start_workflow(client, n)
            await asyncio.sleep(1 / self.args.rate)
        await faults
        await client.schedules.delete(f"{self.group}-cron")
        print(f"load over: {len(self.started)} workflows started; faults: {dict(self.stats)}")
        problems = await self.audit(client)
        # The work sent to the failing push target is retried for as long as it is pending
        # (that is the protocol); an operator gives up on it, and then the server may idle.
        for id in self.pushed:
            with contextlib.suppress(Exception):
                await client.promises.cancel(id, "the soak is over")
        await client.stop()
        problems += self.idle_check(baseline)
        for worker in self.live_workers():
            worker.send_signal(signal.SIGTERM)
        for worker in self.workers:
            worker.wait(30)
        for server in self.servers:
            server.stop()
        self.target.close()
        for problem in problems[:20]:
            print("PROBLEM:", problem)
        print("soak:", "FAILED" if problems else "passed", f"({len(problems)} problems)")
        return 1 if problems else 0

    async def start_workflow(self, client: object, n: int) -> None:
        from troth import Troth

        assert isinstance(client, Troth)
        id = f"{self.group}-wf{n}"
        try:
            handle = client.options(target=self.group).rpc(id, "workflow", n)
            await asyncio.wait_for(handle.started(), 60)
        except Exception as e:  # not acknowledged: the audit does not count it
            self.stats["start refused"] += 1
            print(f"start of {id} not acknowledged: {e!r}")
            return
        self.started[id] = n
        approval = asyncio.ensure_future(self.approve(client, id))
        self.approvals.add(approval)
        approval.add_done_callback(self.approvals.discard)
        if n % 10 == 0:  # a share of the work goes to a push target that always fails
            try:
                await client.options(target=self.target.url).rpc(f"{id}-push", "ticker").started()
                self.pushed.append(f"{id}-push")
                self.stats["pushed"] += 1
            except Exception:
                pass

    async def approve(self, client: object, id: str) -> None:
        from troth import Troth

        assert isinstance(client, Troth)
        while True:
            await asyncio.sleep(1)
            try:
                promise = await client.promises.get(f"{id}:approval")
            except Exception:
                continue
            if not promise.pending:
                return
            try:
                await client.promises.resolve(f"{id}:approval", 2)
                return
            except Exception:
                continue

    async def faults(self, end: float) -> None:
        short = self.args.duration < 600
        server_every = (8, 15) if short else (20, 60)
        next_server = time.monotonic() + self.rng.uniform(*server_every)
        next_worker = time.monotonic() + self.rng.uniform(5, 12)
        pg = self.args.backend == "pg"
        pg_restart = time.monotonic() + self.args.duration / 2 if pg else None
        while time.monotonic() < end:
            now = time.monotonic()
            if now >= next_server:
                server = self.rng.choice(self.servers)
                server.kill()
                self.stats["server kill -9"] += 1
                await asyncio.sleep(self.rng.uniform(0.5, 2))
                await asyncio.to_thread(server.start)
                next_server = now + self.rng.uniform(*server_every)
            if now >= next_worker:
                live = self.live_workers()
                if live:
                    self.rng.choice(live).kill()
                    self.stats["worker kill -9"] += 1
                self.start_worker()
                next_worker = now + self.rng.uniform(5, 12)
            if pg_restart is not None and now >= pg_restart:
                pg_cluster("down")
                await asyncio.sleep(2)
                pg_cluster("start")
                self.stats["postgres restart"] += 1
                pg_restart = None
            await asyncio.sleep(0.2)

    # -- the audit --------------------------------------------------------------------------

    async def audit(self, client: object) -> list[str]:
        from troth import Troth

        assert isinstance(client, Troth)
        problems: list[str] = []
        deadline = time.monotonic() + self.args.settle
        pending = dict(self.started)
        values: dict[str, int] = {}
        while pending and time.monotonic() < deadline:
            for id in list(pending):
                try:
                    promise = await client.promises.get(id)
                except Exception:
                    continue
                if not promise.pending:
                    try:
                        values[id] = promise.value()
                    except Exception as e:
                        problems.append(f"{id} failed: {e!r}")
                    del pending[id]
            await asyncio.sleep(1)
        problems += [f"{id} never completed" for id in pending]
        problems += [
            f"{id} returned {values[id]}, expected {expected(n)}"
            for id, n in self.started.items()
            if id in values and values[id] != expected(n)
        ]
        # No step started after its result was recorded.
        starts: dict[str, list[int]] = {}
        for line in self.ledger.read_text().splitlines():
            event, key, at = line.split()
            if event == "start":
                starts.setdefault(key, []).append(int(at))
        checked = 0
        for key, times in starts.items():
            step = await self.step_of(client, key)
            if step is None or step.record.settled_at is None:
                continue
            checked += 1
            late = [t for t in times if t > step.record.settled_at]
            if late:
                problems.append(f"step {key} started again after its result was recorded")
        again = sum(len(t) - 1 for t in starts.values())
        print(
            f"audit: {len(values)} completed, {checked} steps checked, "
            f"{again} re-run after a cut-off"
        )
        return problems

    async def step_of(self, client: object, key: str) -> object | None:
        """The promise of the step whose ledger key is ``key`` (its id is recorded as a tag
        of nothing; the step's promise is found by its parent and kind)."""
        from troth import Troth

        assert isinstance(client, Troth)
        parent = key.rsplit(":", 1)[0]
        position = {"a": "0", "sq": "0", "c": "4", "tick": "0"}[key.rsplit(":", 1)[1]]
        sep = "." if ":" in parent else ":"
        try:
            promise = await client.promises.get(f"{parent}{sep}{position}")
        except Exception:
            return None
        return None if promise.pending else promise

    def idle_share(self, seconds: float = 10) -> float:
        """The share of a core the (first) server uses over ``seconds`` of no load."""
        server = self.servers[0]
        cpu0, _ = server.usage()
        time.sleep(seconds)
        cpu1, _ = server.usage()
        return (cpu1 - cpu0) / seconds

    def idle_check(self, baseline: tuple[int, float]) -> list[str]:
        """After the run, idle again: under 2 % of a core (or at most a point over the idle
        share before the load, on a box whose background costs more), memory near where it
        was after warm-up."""
        rss_before, share_before = baseline
        time.sleep(3)
        share = self.idle_share()
        _, rss = self.servers[0].usage()
        print(
            f"idle server: {share:.1%} of a core (before the load: {share_before:.1%}), "
            f"RSS {rss / 2**20:.0f} MiB (after warm-up: {rss_before / 2**20:.0f} MiB)"
        )
        problems = []
        if share >= max(0.02, share_before + 0.01):
            problems.append(f"the idle server used {share:.1%} of a core")
        if rss > rss_before + 64 * 2**20:
            problems.append(
                f"server RSS {rss / 2**20:.0f} MiB, {rss_before / 2**20:.0f} after warm-up"
            )
        return problems


def pg_cluster(command: str) -> str:
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "pg-cluster.sh"), command], capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(f"pg-cluster.sh {command} failed:\n{done.stderr}")
    return done.stdout.strip()


def pg_database() -> str:
    import psycopg

    url = os.environ.get("TROTH_TEST_PG_URL") or pg_cluster("start")
    name = f"troth_soak_{secrets.token_hex(4)}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return url.rsplit("/", 1)[0] + f"/{name}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=60, help="seconds of load")
    parser.add_argument("--backend", choices=("sqlite", "pg"), default="sqlite")
    parser.add_argument("--rate", type=float, default=4, help="workflows started per second")
    parser.add_argument("--settle", type=float, default=120, help="seconds to let work finish")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="troth-soak-") as work:
        code = asyncio.run(Soak(args, Path(work)).run())
    if args.json:
        Path(args.json).write_text(json.dumps({"exit": code}))
    return code


if __name__ == "__main__":
    sys.exit(main())
