"""Hello: a durable function with one durable step.

    python examples/hello.py [name]

Run it twice with the same name: the second run joins the recorded execution and prints
its result without running the step again.
"""

from __future__ import annotations

import asyncio
import sys

from troth import Context, Troth

app = Troth(group="hello")  # embedded in ./troth.db; with TROTH_URL, a worker of that server


def greet(name: str) -> str:
    print(f"  (running the step for {name})")
    return f"Hello, {name}!"


@app.register
async def hello(ctx: Context, name: str) -> str:
    return await ctx.run(greet, name)


async def main(name: str) -> None:
    async with app:
        print(await app.run(f"hello-{name}", hello, name).result())


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "world"))
