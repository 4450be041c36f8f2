"""What goes wrong in an execution reaches its user without any logging set up.

The SDK configures no logging (a library must not), so a line reaches stderr only through
Python's last-resort handler, which prints WARNING and above when nothing is configured.
Retries and lease losses are therefore WARNING lines of ``troth.sdk`` loggers, and a halt
(which waits for an operator) an ERROR line, each naming its promise or task. Before,
retries were INFO and a lease loss DEBUG: a process that retried a step three times
printed nothing.

The script runs in a process of its own so that nothing (pytest's capture included)
configures logging for it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a process of its own, a lease left to lapse

SCRIPT = """
import asyncio
import sys
import time
from datetime import timedelta

from troth import Constant, Context, HaltedError, Troth

app = Troth(db=sys.argv[1], ttl=timedelta(seconds=1))
FAILURES = {"step": 1, "root": 1, "block": 1}
AMOUNT = {"now": 100}


def flaky() -> str:
    if FAILURES["step"]:
        FAILURES["step"] -= 1
        raise RuntimeError("the card service timed out")
    return "charged"


@app.register
async def step_retried(ctx: Context) -> str:
    return await ctx.options(retry=Constant(0.05, max_attempts=3)).run(flaky)


@app.register(retry=Constant(0.05, max_attempts=3))
async def run_retried(ctx: Context) -> str:
    if FAILURES["root"]:
        FAILURES["root"] -= 1
        raise RuntimeError("the inventory was locked")
    return "shipped"


def noop() -> None:
    pass


@app.register
async def lease_lost(ctx: Context) -> str:
    if FAILURES["block"]:
        FAILURES["block"] -= 1
        time.sleep(1.5)  # holds the event loop: no heartbeat, the 1 s lease may lapse
    await ctx.run(noop)
    return "done"


def charge(amount: int) -> int:
    return amount


@app.register
async def halted(ctx: Context) -> int:
    charged = await ctx.run(charge, AMOUNT["now"])
    await ctx.promise(id=f"{ctx.id}:approval")
    return charged


async def main() -> None:
    async with app:
        assert await app.run("retry-a-step", step_retried).result() == "charged"
        assert await app.run("retry-a-run", run_retried).result() == "shipped"
        assert await app.run("lose-a-lease", lease_lost).result() == "done"
        handle = app.run("halt-a-run", halted)
        while True:
            try:
                if (await app.promises.get("halt-a-run:approval")).pending:
                    break
            except Exception:
                pass
            await asyncio.sleep(0.01)
        AMOUNT["now"] = 200  # a deploy that changed the step's arguments
        await app.promises.resolve("halt-a-run:approval", "ok")
        try:
            await asyncio.wait_for(handle.result(), 20)
        except HaltedError:
            print("halted", flush=True)


asyncio.run(main())
"""


def test_retries_halts_and_lease_losses_reach_stderr_with_no_logging_configured(
    tmp_path: Path,
) -> None:
    script = tmp_path / "warnings_script.py"
    script.write_text(SCRIPT)
    ran = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "t.db")],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == "halted\n"
    lines = ran.stderr.splitlines()

    def one(*words: str) -> str:
        found = [line for line in lines if all(w in line for w in words)]
        assert len(found) == 1, (words, ran.stderr)
        return found[0]

    one("step retry-a-step:0 failed (attempt 1", "the card service timed out", "retrying in")
    one("task retry-a-run failed (attempt 1", "the inventory was locked", "retrying in")
    one("task lose-a-lease:", "may have lapsed", "the task's next run takes over")
    one("function lease_lost of execution lose-a-lease", "blocked the event loop for 1.5 s")
    one("task halt-a-run halts:", "non-determinism", "task.continue")
    # Nothing else: what went well stays at INFO, below the last-resort handler.
    assert len(lines) == 5, ran.stderr
