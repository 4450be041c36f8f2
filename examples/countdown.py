"""Durable countdown: sleep between ticks with timers that survive restarts.

    python examples/countdown.py [from] [seconds-between-ticks]

Each ``ctx.sleep`` is a timer promise on the server; the execution is suspended while it
runs. Kill the process mid-countdown and run it again: it continues where it was,
without re-announcing the ticks already announced.
"""

from __future__ import annotations

import asyncio
import sys

from troth import Context, Troth

app = Troth(group="countdown")  # embedded in ./troth.db; with TROTH_URL, a worker of that server


def announce(n: int) -> None:
    print(f"  {n}..." if n else "  liftoff!")


@app.register
async def countdown(ctx: Context, start: int, pause: float) -> str:
    for n in range(start, -1, -1):
        await ctx.run(announce, n)
        if n:
            await ctx.sleep(pause)
    return f"counted down from {start}"


async def main(start: int, pause: float) -> None:
    async with app:
        print(await app.run(f"countdown-{start}-{pause}", countdown, start, pause).result())


if __name__ == "__main__":
    start = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    asyncio.run(main(start, float(sys.argv[2]) if len(sys.argv) > 2 else 1.0))
