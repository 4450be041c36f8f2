"""Fan-out / fan-in: start many durable calls at once, then gather their results.

    python examples/fan_out.py [n]

Each ``ctx.rpc`` is a child execution any worker of the group may run; ``asyncio.gather``
waits for all of them. Child ids are numbered in call order, so a replay finds each one.
"""

from __future__ import annotations

import asyncio
import sys

from troth import Context, Troth

app = Troth(group="fan-out")  # embedded in ./troth.db; with TROTH_URL, a worker of that server


@app.register
async def word_length(ctx: Context, word: str) -> int:
    return len(word)


@app.register
async def total_length(ctx: Context, words: list[str]) -> int:
    lengths = await asyncio.gather(*(ctx.rpc(word_length, w) for w in words))
    return sum(lengths)


async def main(n: int) -> None:
    words = [f"word{'x' * i}" for i in range(n)]
    async with app:
        total = await app.run(f"fan-out-{n}", total_length, words).result()
        print(f"{n} words, {total} letters")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 10))
