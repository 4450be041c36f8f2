"""Queues under faults, with real parts: worker processes (``troth worker``) against a
``troth serve`` on SQLite, each run's start and end in an fsync'd ledger
(``tests.support.queueing``), and the limits checked from the ledger.

- A worker SIGKILLed while it holds a slot: the slot stays held until the lease lapses
  (short here), then the execution is offered again and another worker finishes it; no
  other execution ran over a limit meanwhile.
- The server ``kill -9``ed mid-run and restarted on the same file: every execution
  completes, and the queue's counts return to 0 (no slot lost or counted twice).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support import processes
from tests.support.queueing import (
    Spec,
    held,
    most_at_once,
    queue_counts,
    run_queued,
    runs,
    worker_env,
    write_worker,
)
from tests.support.servers import TrothServer

# Slow: a server and three worker processes per test, a few seconds each.
pytestmark = pytest.mark.slow


@pytest.fixture
def server(tmp_path: Path) -> Iterator[TrothServer]:
    server = TrothServer(tmp_path / "queues.db", tmp_path / "server.log")
    try:
        yield server.start()
    finally:
        server.close()


@pytest.fixture
def start_workers(tmp_path: Path) -> Iterator[Callable[..., list[subprocess.Popen[bytes]]]]:
    module = write_worker(tmp_path)
    started: list[subprocess.Popen[bytes]] = []

    def start(n: int, env: dict[str, str]) -> list[subprocess.Popen[bytes]]:
        for _ in range(n):
            log = tmp_path / f"worker{len(started)}.log"
            started.append(processes.worker(tmp_path, env, module, log=log))
        return started[-n:]

    yield start
    for process in started:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process in started:
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def logs(folder: Path) -> str:
    return "\n".join(
        f"--- {path.name}\n{path.read_text(errors='replace')[-2000:]}"
        for path in sorted(folder.glob("*.log"))
    )


def wait_for_file(path: Path, within: float = 30) -> str:
    deadline = time.monotonic() + within
    while not path.exists() or not path.read_text():
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.01)
    return path.read_text()


def test_a_worker_killed_holding_a_slot_frees_it_when_its_lease_lapses(
    server: TrothServer, start_workers: Callable[..., list[subprocess.Popen[bytes]]],
    tmp_path: Path,
) -> None:  # fmt: skip
    ttl = 2.0
    spec = Spec("faults", concurrency=3, key_concurrency=1)
    ledger = tmp_path / "ledger"
    start_workers(3, worker_env(spec, ledger, [server.url], ttl, VICTIM="victim"))
    jobs = [("victim", "k0", 0.05)] + [(f"j{n}", f"k{n % 4}", 0.1) for n in range(40)]
    killed: list[float] = []

    def kill_the_victim() -> None:
        pid = int(wait_for_file(Path(f"{ledger}.hung")))
        os.kill(pid, signal.SIGKILL)
        killed.append(time.monotonic())

    async def main() -> dict[str, str]:
        killer = asyncio.create_task(asyncio.to_thread(kill_the_victim))
        results = await run_queued([server.url], spec, jobs)
        await killer
        return results

    results = asyncio.run(main())
    assert results == {id: key for id, key, _ in jobs}, logs(tmp_path)
    done = runs(ledger)
    first, *again = [run for run in done if run.id == "victim"]
    assert first.end is None and [run.end is not None for run in again] == [True]
    # Offered again once the lease lapsed (not before; not long after), to another worker.
    waited = again[0].start - killed[0]
    assert ttl * 0.5 < waited < ttl + 3, waited
    assert again[0].pid != first.pid
    spans = held(done, until=time.monotonic())
    assert most_at_once(spans) == 3  # reached, and never exceeded
    assert all(most_at_once(spans, f"k{k}") == 1 for k in range(4))
    # While the killed worker's slot was held, nothing else of key k0 ran.
    assert not [r for r in done if r.key == "k0" and killed[0] < r.start < again[0].start]
    assert queue_counts(server.call("queue.get", {"name": spec.name})) == (0, 0)


def test_a_server_killed_mid_run_loses_no_slot_and_counts_none_twice(
    server: TrothServer, start_workers: Callable[..., list[subprocess.Popen[bytes]]],
    tmp_path: Path,
) -> None:  # fmt: skip
    spec = Spec("restart", concurrency=4, key_concurrency=2)
    ledger = tmp_path / "ledger"
    start_workers(3, worker_env(spec, ledger, [server.url], ttl=10))
    jobs = [(f"j{n}", f"k{n % 6}", 0.1) for n in range(60)]

    def kill_and_restart() -> None:
        deadline = time.monotonic() + 30
        while not ledger.exists() or ledger.read_text().count("end ") < 12:
            assert time.monotonic() < deadline, "nothing ran"
            time.sleep(0.01)
        server.kill()
        server.start()

    async def main() -> dict[str, str]:
        crash = asyncio.create_task(asyncio.to_thread(kill_and_restart))
        results = await run_queued([server.url], spec, jobs)
        await crash
        return results

    results = asyncio.run(main())
    assert results == {id: key for id, key, _ in jobs}, logs(tmp_path)
    done = runs(ledger)
    assert {run.id for run in done} == {id for id, _, _ in jobs}
    spans = held(done, until=time.monotonic())
    assert most_at_once(spans) <= 4
    assert all(most_at_once(spans, f"k{k}") <= 2 for k in range(6))
    assert queue_counts(server.call("queue.get", {"name": spec.name})) == (0, 0)
