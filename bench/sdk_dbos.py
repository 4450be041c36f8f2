"""The DBOS side of the SDK benchmark: the same workflows on DBOS, the first peer.

Run by a Python that has ``dbos`` installed (``bench/sdk.py`` makes a venv for it), from a
scratch directory: DBOS is configured with nothing but a name, so it uses its default
system database, a SQLite file in the working directory. Prints one JSON object per case,
like ``sdk_troth.py``.

DBOS workflows and steps are plain functions, the shape its documentation leads with; the
callers are threads, each calling a workflow and waiting for its result before the next,
so ``callers`` is the number of workflows in flight.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from typing import Any

from callers import drive, sessionless
from dbos import DBOS, SetWorkflowID


@DBOS.step()
def add_one(x: int) -> int:
    return x + 1


@DBOS.workflow()
def one_step(x: int) -> int:
    return add_one(x)


@DBOS.workflow()
def ten_steps(x: int) -> int:
    for _ in range(10):
        x = add_one(x)
    return x


@DBOS.workflow()
def hundred_steps(x: int) -> int:
    for _ in range(100):
        x = add_one(x)
    return x


WORKFLOWS: dict[int, Callable[[int], int]] = {1: one_step, 10: ten_steps, 100: hundred_steps}


def measure(fn: Callable[[int], int], steps: int, n: int, callers: int, tag: str) -> dict:
    def call(i: int) -> None:
        with SetWorkflowID(f"{tag}-{i}"):
            result = fn(i)
        if result != i + steps:
            raise AssertionError(f"{tag}-{i} answered {result}, expected {i + steps}")

    return drive(n, callers, sessionless(call))


def main(args: argparse.Namespace) -> None:
    config: Any = {"name": "troth-bench", "log_level": "WARNING"}
    DBOS(config=config)
    DBOS.launch()
    run_id = os.urandom(4).hex()
    try:
        measure(WORKFLOWS[10], 10, 20, 4, f"warm-{run_id}")
        for steps in args.steps:
            for callers in args.callers:
                tag = f"{run_id}-s{steps}-c{callers}"
                figures = measure(WORKFLOWS[steps], steps, args.n, callers, tag)
                case = {"system": "dbos", "mode": "embedded", "steps": steps, "callers": callers}
                print(json.dumps({**case, "n": args.n, **figures}), flush=True)
    finally:
        DBOS.destroy()


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="workflows per case")
    parser.add_argument("--callers", type=lambda s: [int(c) for c in s.split(",")], default=[1, 16])
    parser.add_argument("--steps", type=lambda s: [int(c) for c in s.split(",")], default=[1, 10])
    return parser.parse_args()


if __name__ == "__main__":
    main(parse())
