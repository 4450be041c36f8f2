"""The troth side of the SDK benchmark: one process, one app, one mode.

``python bench/sdk_troth.py embedded --db PATH`` or ``... remote --url URL``, with
``--n`` executions per case and ``--callers`` / ``--steps`` lists. Prints one JSON object
per case on stdout (``bench/sdk.py`` reads them). Run it alone to profile one mode:
``py-spy record -o out.svg -- python bench/sdk_troth.py embedded --db /tmp/x.db``.

The callers are asyncio tasks of the app's own process (the SDK's natural shape: an
``async`` service starting executions), each starting one execution and awaiting its
result before the next, so ``callers`` is the number of executions in flight.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from typing import Any

from troth import Context, Troth


def add_one(x: int) -> int:
    """The step: cheap, so the figures measure the SDK and the store, not the work."""
    return x + 1


async def add_one_async(x: int) -> int:
    return x + 1


def build(app: Troth, step: Any) -> dict[int, Any]:
    """The 1-, 10- and 100-step workflows, registered on ``app``."""

    @app.register(name="one_step")
    async def one_step(ctx: Context, x: int) -> int:
        return await ctx.run(step, x)

    @app.register(name="ten_steps")
    async def ten_steps(ctx: Context, x: int) -> int:
        for _ in range(10):
            x = await ctx.run(step, x)
        return x

    @app.register(name="hundred_steps")
    async def hundred_steps(ctx: Context, x: int) -> int:
        for _ in range(100):
            x = await ctx.run(step, x)
        return x

    return {1: one_step, 10: ten_steps, 100: hundred_steps}


async def measure(app: Troth, fn: Any, steps: int, n: int, callers: int, tag: str) -> dict:
    latencies: list[float] = []
    next_index = iter(range(n))

    async def caller() -> None:
        for i in next_index:
            begun = time.perf_counter()
            result = await app.run(f"{tag}-{i}", fn, i).result()
            latencies.append(time.perf_counter() - begun)
            if result != i + steps:
                raise AssertionError(f"{tag}-{i} answered {result}, expected {i + steps}")

    begun = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(callers)))
    elapsed = time.perf_counter() - begun
    return {"seconds": elapsed, "latencies": latencies}


async def main(args: argparse.Namespace) -> None:
    registry = None
    if args.metrics:
        from prometheus_client import CollectorRegistry

        registry = CollectorRegistry()
    if args.mode == "embedded":
        app = Troth(db=args.db, group="bench", metrics=registry)
    else:
        app = Troth(url=args.url, group="bench", metrics=registry)
    step = add_one_async if args.async_steps else add_one
    if args.inline:
        app.register(inline=True)(step)  # every ctx.run of the step runs on the loop
    workflows = build(app, step)
    mode = f"{args.mode} inline" if args.inline else args.mode
    run_id = os.urandom(4).hex()  # ids unique across runs that share a database
    async with app:
        # Warm up: connections, SQLite pages, the thread pool, the SSE stream.
        await measure(app, workflows[10], 10, 20, 4, f"warm-{run_id}")
        for steps in args.steps:
            for callers in args.callers:
                tag = f"{run_id}-s{steps}-c{callers}"
                figures = await measure(app, workflows[steps], steps, args.n, callers, tag)
                case = {"system": "troth", "mode": mode, "steps": steps, "callers": callers}
                print(json.dumps({**case, "n": args.n, **figures}), flush=True)
    if registry is not None:  # proof that the metrics counted: the runs they saw
        runs = sum(
            sample.value
            for family in registry.collect()
            if family.name == "troth_sdk_runs_finished"
            for sample in family.samples
            if sample.name.endswith("_total")
        )
        print(json.dumps({"runs_counted": runs}), flush=True)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["embedded", "remote"])
    parser.add_argument("--db", default="troth-bench.db", help="SQLite file (embedded)")
    parser.add_argument("--url", default="http://127.0.0.1:8001", help="server (remote)")
    parser.add_argument("--n", type=int, default=1000, help="executions per case")
    parser.add_argument("--callers", type=lambda s: [int(c) for c in s.split(",")], default=[1, 16])
    parser.add_argument("--steps", type=lambda s: [int(c) for c in s.split(",")], default=[1, 10])
    parser.add_argument("--async-steps", action="store_true", help="async def steps, no thread")
    parser.add_argument(
        "--inline", action="store_true", help="the step on the loop: register(inline=True)"
    )
    parser.add_argument("--uvloop", action="store_true", help="run on uvloop")
    parser.add_argument("--metrics", action="store_true", help="Troth(metrics=a registry)")
    return parser.parse_args(argv)


if __name__ == "__main__":
    arguments = parse()
    if arguments.uvloop:
        import uvloop

        uvloop.run(main(arguments))
    else:
        asyncio.run(main(arguments))
