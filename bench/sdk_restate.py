"""The Restate side of the SDK benchmark: the same workflows on Restate, the second peer.

Two roles in one file, both run by a Python that has ``restate-sdk`` and ``hypercorn``
(``bench/sdk.py`` makes a venv for them):

- the service: ``hypercorn sdk_restate:app`` serves a Restate service ``bench`` whose
  handlers are the 1-, 10- and 100-step workflows, each step a ``ctx.run_typed`` of a cheap
  ``def`` (the SDK runs it on the loop's thread pool, as troth runs a ``def`` step);
- the callers: ``python sdk_restate.py --ingress URL`` calls the handlers through
  ``restate-server``'s HTTP ingress and prints one JSON object per case, like
  ``sdk_troth.py``.

Each call carries an ``idempotency-key`` (the execution's id), so Restate deduplicates it
as troth does an execution id and DBOS a workflow id, and waits for the result. The callers
are threads, each on a keep-alive ``http.client`` connection of its own, calling and
waiting for the result before the next, so ``callers`` is the number of invocations in
flight; ``http.client`` is light enough that the caller's CPU stays small against the
server's and the service's.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
from collections.abc import Iterator
from urllib.parse import urlsplit

import restate
from callers import Call, drive

service = restate.Service("bench")


def add_one(x: int) -> int:
    """The step: cheap, so the figures measure the SDK and the server, not the work."""
    return x + 1


async def steps(ctx: restate.Context, x: int, count: int) -> int:
    for _ in range(count):
        x = await ctx.run_typed("add_one", add_one, restate.RunOptions(), x)
    return x


@service.handler()
async def one_step(ctx: restate.Context, x: int) -> int:
    return await steps(ctx, x, 1)


@service.handler()
async def ten_steps(ctx: restate.Context, x: int) -> int:
    return await steps(ctx, x, 10)


@service.handler()
async def hundred_steps(ctx: restate.Context, x: int) -> int:
    return await steps(ctx, x, 100)


app = restate.app([service])

HANDLERS = {1: "one_step", 10: "ten_steps", 100: "hundred_steps"}


def measure(ingress: str, steps: int, n: int, callers: int, tag: str) -> dict:
    address = urlsplit(ingress)
    path = f"/bench/{HANDLERS[steps]}"

    @contextlib.contextmanager
    def session() -> Iterator[Call]:
        connection = http.client.HTTPConnection(address.hostname, address.port, timeout=60)

        def call(i: int) -> None:
            headers = {"content-type": "application/json", "idempotency-key": f"{tag}-{i}"}
            connection.request("POST", path, json.dumps(i), headers)
            response = connection.getresponse()
            body = response.read()
            if response.status != 200:
                raise AssertionError(f"{tag}-{i}: HTTP {response.status} {body[:500]!r}")
            if json.loads(body) != i + steps:
                raise AssertionError(f"{tag}-{i} answered {body!r}, expected {i + steps}")

        try:
            yield call
        finally:
            connection.close()

    return drive(n, callers, session)


def main(args: argparse.Namespace) -> None:
    run_id = os.urandom(4).hex()
    # Warm up: the deployment's connections, the service's loop and thread pool.
    measure(args.ingress, 10, 20, 4, f"warm-{run_id}")
    for count in args.steps:
        for callers in args.callers:
            tag = f"{run_id}-s{count}-c{callers}"
            figures = measure(args.ingress, count, args.n, callers, tag)
            case = {"system": "restate", "mode": "server", "steps": count, "callers": callers}
            print(json.dumps({**case, "n": args.n, **figures}), flush=True)


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ingress", required=True, help="restate-server's ingress URL")
    parser.add_argument("--n", type=int, default=1000, help="invocations per case")
    parser.add_argument("--callers", type=lambda s: [int(c) for c in s.split(",")], default=[1, 16])
    parser.add_argument("--steps", type=lambda s: [int(c) for c in s.split(",")], default=[1, 10])
    return parser.parse_args()


if __name__ == "__main__":
    main(parse())
