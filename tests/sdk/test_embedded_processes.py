"""Several real processes on one embedded database file.

A promise settled by another process (a script, another app) resumes its waiters here
within a second; a running app leaves other processes' messages to them; an app that
starts alone on a file takes back a killed process's task at once instead of waiting out
its 30 s lease, and one that starts beside a live process takes nothing from it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest

# Slow: every test runs workflows in processes of their own and kills or stops them.
pytestmark = pytest.mark.slow

# An app on the file given as argv[1]. ``wait workflow|promise OUT``: wait for a promise
# settled elsewhere (awaited by a suspended workflow, or by a caller's ``result()``) and
# write the instant the value arrived. ``pipeline LEDGER HANG_AT``: run four steps, each
# logged to the ledger; the step at HANG_AT runs until a file ``LEDGER.release`` exists.
# ``idle LEDGER HANG_AT SECONDS``: the same app running for SECONDS, starting nothing itself.
APP = textwrap.dedent(
    """
    import asyncio, json, os, sys, time
    from datetime import timedelta
    from pathlib import Path

    from troth import Context, Troth

    app = Troth(db=sys.argv[1])  # the default lease: 30 s
    MODE = sys.argv[2]


    def announce(promise_id: str) -> None:
        Path(sys.argv[3] + ".ready").write_text(promise_id)


    @app.register
    async def approval(ctx: Context) -> dict:
        answer = ctx.promise(timeout=timedelta(hours=1))
        await ctx.run(announce, answer.id)
        return await answer


    def record(line: str) -> None:
        with open(sys.argv[3], "a") as ledger:
            ledger.write(line + "\\n")
            ledger.flush()
            os.fsync(ledger.fileno())


    def step(n: int) -> int:
        record(f"start {n}")
        if n == int(sys.argv[4]):
            while not Path(sys.argv[3] + ".release").exists():
                time.sleep(0.02)
        record(f"done {n}")
        return n * n


    @app.register
    async def pipeline(ctx: Context, steps: int) -> int:
        total = 0
        for n in range(steps):
            total += await ctx.run(step, n)
        return total


    async def main() -> None:
        async with app:
            if MODE == "idle":
                await asyncio.sleep(float(sys.argv[5]))
                return
            if MODE == "pipeline":
                print("total", await app.run("pipeline-1", pipeline, 4).result(), flush=True)
                return
            if MODE == "workflow":
                value = await app.run("approval-1", approval).result()
            else:
                await app.promises.create("external-1", timeout=timedelta(hours=1))
                announce("external-1")
                value = await app.get("external-1").result()
            Path(sys.argv[3]).write_text(json.dumps({"at": time.time(), "value": value}))


    asyncio.run(main())
    """
)

# ``python resolver.py DB PROMISE started|script STAY``: resolve a promise, print the instant
# it was committed; ``started``: as a running app, which stays up STAY seconds afterwards.
RESOLVER = textwrap.dedent(
    """
    import asyncio, sys, time

    from troth import Troth

    app = Troth(db=sys.argv[1])


    async def main() -> None:
        if sys.argv[3] == "started":
            await app.start()
        try:
            await app.promises.resolve(sys.argv[2], {"approved": True})
            print(time.time(), flush=True)
            await asyncio.sleep(float(sys.argv[4]))
        finally:
            await app.stop()


    asyncio.run(main())
    """
)


@pytest.fixture
def scripts(tmp_path: Path) -> tuple[Path, Path]:
    app, resolver = tmp_path / "app.py", tmp_path / "resolver.py"
    app.write_text(APP)
    resolver.write_text(RESOLVER)
    return app, resolver


def spawn(*args: str | Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        cwd=Path(args[0]).parent,
    )


def wait_for(path: Path, process: subprocess.Popen[bytes], what: str, within: float = 30) -> None:
    deadline = time.monotonic() + within
    while not path.exists():
        if process.poll() is not None:
            raise AssertionError(f"{what}: the process exited\n{process.stdout.read().decode()}")
        assert time.monotonic() < deadline, f"{what}: not within {within} s"
        time.sleep(0.02)


def finish(process: subprocess.Popen[bytes], within: float, what: str) -> str:
    try:
        output, _ = process.communicate(timeout=within)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
        message = f"{what} did not finish within {within} s\n{output.decode()}"
        raise AssertionError(message) from None
    assert process.returncode == 0, output.decode()
    return output.decode()


def resolve(resolver: Path, db: Path, promise_id: str, mode: str, stay: float = 0) -> float:
    done = subprocess.run(
        [sys.executable, str(resolver), str(db), promise_id, mode, str(stay)],
        capture_output=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr.decode()
    return float(done.stdout.decode().split()[-1])


def ledger(path: Path) -> Counter[str]:
    return Counter(path.read_text().splitlines()) if path.exists() else Counter()


@pytest.mark.parametrize("resolver_mode", ["script", "started"])
def test_a_workflow_waiting_on_a_promise_resumes_when_another_process_settles_it(
    scripts, tmp_path, resolver_mode
):
    app, resolver = scripts
    db, out = tmp_path / "troth.db", tmp_path / "out"
    waiter = spawn(app, db, "workflow", out)
    try:
        wait_for(Path(f"{out}.ready"), waiter, "the workflow never asked for approval")
        time.sleep(0.5)  # let it suspend: nothing in this process holds it any more
        promise_id = Path(f"{out}.ready").read_text()
        settled_at = resolve(resolver, db, promise_id, resolver_mode)
        finish(waiter, 10, "the waiting workflow")
    finally:
        waiter.kill()
    result = json.loads(out.read_text())
    assert result["value"] == {"approved": True}
    # Woken by the file's watch (every 0.1 s), not by the client's slow re-check (10 s): the
    # bound is half of that, room for a loaded machine to stall either process.
    assert result["at"] - settled_at < 5.0


def test_a_running_app_leaves_another_process_the_news_it_listens_for(scripts, tmp_path):
    """The second app reads the same outbox, and must not take the unblock addressed to the
    first app's caller: the caller would hear of its promise only from a slow re-check."""
    app, resolver = scripts
    db, out = tmp_path / "troth.db", tmp_path / "out"
    waiter = spawn(app, db, "promise", out)
    try:
        wait_for(Path(f"{out}.ready"), waiter, "the caller never created its promise")
        time.sleep(0.5)  # let it register its listener
        settled_at = resolve(resolver, db, "external-1", "started", stay=2)
        finish(waiter, 10, "the waiting caller")
    finally:
        waiter.kill()
    result = json.loads(out.read_text())
    assert result["value"] == {"approved": True}
    assert result["at"] - settled_at < 5.0  # not the 10 s re-check: see above


def test_an_app_alone_on_the_file_resumes_a_killed_workflow_without_waiting_out_its_lease(
    scripts, tmp_path
):
    app, _ = scripts
    db, steps = tmp_path / "troth.db", tmp_path / "ledger"
    first = spawn(app, db, "pipeline", steps, "2")
    try:
        wait_for(steps, first, "the first process never started a step")
        deadline = time.monotonic() + 30
        while ledger(steps)["start 2"] == 0:
            assert first.poll() is None, first.stdout.read().decode()
            assert time.monotonic() < deadline, "the first process never reached step 2"
            time.sleep(0.02)
    finally:
        first.kill()  # SIGKILL: the task stays acquired under a 30 s lease nobody renews
        first.wait()
    Path(f"{steps}.release").write_text("")  # the re-run of step 2 need not hang

    started = time.monotonic()
    second = spawn(app, db, "pipeline", steps, "-1")
    output = finish(second, 25, "the restarted workflow")
    # Well under the 30 s lease (a new process's start-up alone takes seconds when loaded).
    assert time.monotonic() - started < 20, "the restart waited for the dead process's lease"
    assert "total 14" in output
    counts = ledger(steps)
    assert all(counts[f"done {n}"] == 1 for n in range(4)), counts
    assert counts["start 2"] == 2  # the step cut off by the kill runs again; no other does
    assert sum(counts[f"start {n}"] for n in range(4)) == 5


def test_an_app_starting_beside_a_live_one_takes_none_of_its_tasks(scripts, tmp_path):
    app, _ = scripts
    db, steps = tmp_path / "troth.db", tmp_path / "ledger"
    first = spawn(app, db, "pipeline", steps, "1")
    try:
        deadline = time.monotonic() + 30
        while ledger(steps)["start 1"] == 0:
            assert first.poll() is None, first.stdout.read().decode()
            assert time.monotonic() < deadline, "the first process never reached step 1"
            time.sleep(0.02)
        # A second app on the file, with the same functions: were it to take the running
        # task back, it would run step 1 again at once.
        finish(spawn(app, db, "idle", steps, "1", "1.5"), 30, "the second app")
        assert ledger(steps)["start 1"] == 1
        Path(f"{steps}.release").write_text("")
        assert "total 14" in finish(first, 30, "the first process")
    finally:
        first.kill()
    counts = ledger(steps)
    assert all(counts[f"start {n}"] == 1 and counts[f"done {n}"] == 1 for n in range(4)), counts
