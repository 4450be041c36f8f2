"""The workload of the scale-out tests: a workflow that fans out and sleeps.

Worker processes run this app with ``python -m troth worker flow:app`` (from this
directory); ``TROTH_URL`` names the servers, comma-separated, in the order the worker tries
them. The test process imports only ``expected``.
"""

from __future__ import annotations

import asyncio
import os
from datetime import timedelta

from troth import Context, Troth

GROUP = "workers"
FAN_OUT = 3
SLEEP = timedelta(milliseconds=200)

app = Troth(
    url=os.environ.get("TROTH_URL", "http://127.0.0.1:1"),  # unused when only imported
    group=GROUP,
    # Short leases: a task held through a server that died runs again soon.
    ttl=timedelta(seconds=5),
)


@app.register
async def square(ctx: Context, x: int) -> int:
    return x * x


@app.register
async def workflow(ctx: Context, n: int) -> int:
    parts = await asyncio.gather(*(ctx.rpc(square, n + k) for k in range(FAN_OUT)))
    await ctx.sleep(SLEEP)
    return sum(parts)


def expected(n: int) -> int:
    return sum((n + k) ** 2 for k in range(FAN_OUT))
