"""Crash recovery: kill -9 the process mid-workflow, start it again, it finishes, and no
step that had finished runs again.

    python examples/crash_recovery.py      # kill it (kill -9, or Ctrl-\\) during a step
    python examples/crash_recovery.py      # again: it resumes after the last finished step

Each step appends to a ledger file (``crash_recovery.ledger``), so you can see what ran.
The app uses a 2 s lease: that is how long a restarted process waits before it may take
over the dead one's task.
"""

from __future__ import annotations

import asyncio
import os
import time
from datetime import timedelta
from pathlib import Path

from troth import Context, Troth

# Embedded in ./troth.db; with TROTH_URL set, a worker of that server (the short lease is
# how soon a rerun may take over the task of a killed worker there).
app = Troth(group="crash-recovery", ttl=timedelta(seconds=2))
LEDGER = Path(os.environ.get("LEDGER", "crash_recovery.ledger"))
STEP_SECONDS = float(os.environ.get("STEP_SECONDS", "1"))
HANG_AT = int(os.environ.get("HANG_AT", "-1"))  # for the test: a step that never ends


def record(line: str) -> None:
    with LEDGER.open("a") as ledger:
        ledger.write(line + "\n")
        ledger.flush()
        os.fsync(ledger.fileno())


def process_batch(n: int) -> int:
    record(f"start {n}")
    print(f"  step {n} running (pid {os.getpid()})", flush=True)
    time.sleep(3600 if n == HANG_AT else STEP_SECONDS)
    record(f"done {n}")
    return n * n


@app.register
async def pipeline(ctx: Context, steps: int) -> int:
    total = 0
    for n in range(steps):
        total += await ctx.run(process_batch, n)
    return total


async def main() -> None:
    async with app:
        print(f"total {await app.run('pipeline-1', pipeline, 5).result()}", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
