"""The official Resonate Python SDK (resonate-sdk 0.8.x) driven against a troth server.

    python sdk.py worker --url U --group G --pid P --ttl MS --markers FILE [--hang-step N]
    python sdk.py invoke --url U --id ID --func NAME --target G --args JSON

Runs under the Python 3.12 venv made by interop/setup.sh, not troth's own venv: the
SDK needs 3.12. The workflows mirror interop/ts/sdk.mjs one for one, so a test can run
the same scenario with either SDK. A worker serves its group until killed; ``invoke``
starts one workflow on a group through ``rpc``, prints ``RESULT <json>`` and exits.
Steps append lines to the markers file so a test can count how often each one ran.
With INTEROP_TRACE=<file> every request and response is appended to that file.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from resonate.connections.http import HttpConnection
from resonate.connections.sse import SSEConnection
from resonate.context import Context
from resonate.resonate import Resonate

ARGS: argparse.Namespace


def mark(line: str) -> None:
    with open(ARGS.markers, "a") as f:
        f.write(line + "\n")


# --- leaf functions (run as ctx.run steps) -------------------------------------------


def step(ctx: Context, tag: str, i: int) -> int:
    mark(f"{tag} step {i}")
    return i * i


def note(ctx: Context, line: str) -> str:
    mark(line)
    return line


def now(ctx: Context) -> int:
    return time.time_ns() // 1_000_000


async def recover_step(ctx: Context, tag: str, i: int) -> int:
    # In the worker told to hang here the step never returns: the test kills that
    # worker while the step is in flight. Its "done" marker is written only on success.
    mark(f"{tag} enter {i} {ARGS.pid}")
    if i == ARGS.hang_step:
        await asyncio.Event().wait()
    mark(f"{tag} done {i}")
    return i


# --- workflows ------------------------------------------------------------------------


async def hello(ctx: Context, name: str) -> str:
    return f"hello {name}"


async def steps(ctx: Context, tag: str, n: int) -> list[int]:
    return [await ctx.run(step, tag, i) for i in range(1, n + 1)]


async def square(ctx: Context, i: int) -> int:
    return i * i


async def fanout(ctx: Context, target: str, n: int) -> list[int]:
    # Python's durable ops are eager: every rpc is sent before the first await.
    futures = [ctx.options(target=target).rpc("square", i) for i in range(1, n + 1)]
    return [await f for f in futures]


async def callee(ctx: Context, x: int) -> dict[str, Any]:
    return {"pid": ARGS.pid, "value": x + 1}


async def caller(ctx: Context, target: str, x: int) -> dict[str, Any]:
    res = await ctx.options(target=target).rpc("callee", x)
    return {"pid": ARGS.pid, "callee": res}


async def sleeper(ctx: Context, ms: int) -> int:
    t0 = await ctx.run(now)
    await ctx.sleep(timedelta(milliseconds=ms))
    t1 = await ctx.run(now)
    return t1 - t0


async def waiter(ctx: Context, tag: str) -> dict[str, Any]:
    p = ctx.promise()
    await ctx.run(note, f"{tag} promise {await p.id()}")
    return {"got": await p}


async def recover(ctx: Context, tag: str, n: int) -> list[int]:
    return [await ctx.run(recover_step, tag, i) for i in range(1, n + 1)]


WORKFLOWS = [hello, steps, square, fanout, callee, caller, sleeper, waiter, recover]


# --- modes ----------------------------------------------------------------------------


async def worker() -> None:
    resonate = Resonate(
        url=ARGS.url, group=ARGS.group, pid=ARGS.pid, ttl=timedelta(milliseconds=ARGS.ttl)
    )
    for fn in WORKFLOWS:
        resonate.register(fn)
    await CONNECTED.wait()
    print(f"READY {ARGS.pid}", flush=True)
    await asyncio.Event().wait()


async def invoke() -> int:
    resonate = Resonate(url=ARGS.url, group=f"client-{os.getpid()}")
    handle = resonate.options(target=ARGS.target).rpc(ARGS.id, ARGS.func, *json.loads(ARGS.args))
    try:
        result = await handle.result()
    except Exception as exc:  # the test reads the message, so any failure is reported
        print(f"ERROR {type(exc).__name__}: {exc}", flush=True)
        return 1
    print(f"RESULT {json.dumps(result)}", flush=True)
    return 0


# Set when the SDK's SSE stream (GET /poll/...) is answered with 200, so a worker says
# READY only once the server can deliver to it.
CONNECTED = asyncio.Event()


def watch_connections(trace: str | None) -> None:
    """Hook the pinned SDK's HTTP and SSE connections; with a trace file, log all traffic."""

    def log(line: str) -> None:
        if trace:
            with open(trace, "a") as f:
                f.write(line + "\n")

    send, read_stream, recv = (
        HttpConnection.send,
        SSEConnection._read_stream,
        SSEConnection.recv,
    )

    async def traced_send(self: Any, req: str, headers: dict[str, str] | None = None) -> str:
        res = await send(self, req, headers)
        log(f">>> {req}\n<<< {res}")
        return res

    async def connected_read_stream(self: Any, resp: Any) -> None:
        CONNECTED.set()
        await read_stream(self, resp)

    def traced_recv(self: Any, callback: Callable[[str], None]) -> None:
        def logged(data: str) -> None:
            log(f"SSE {data}")
            callback(data)

        recv(self, logged)

    HttpConnection.send = traced_send
    SSEConnection._read_stream = connected_read_stream
    SSEConnection.recv = traced_recv


def main() -> int:
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["worker", "invoke"])
    parser.add_argument("--url", required=True)
    parser.add_argument("--group", default="default")
    parser.add_argument("--pid", default=f"py-{os.getpid()}")
    parser.add_argument("--ttl", type=int, default=60_000)
    parser.add_argument("--markers", default=os.devnull)
    parser.add_argument("--hang-step", type=int, default=0)
    parser.add_argument("--id")
    parser.add_argument("--func")
    parser.add_argument("--target")
    parser.add_argument("--args", default="[]")
    ARGS = parser.parse_args()
    logging.basicConfig(level=os.environ.get("INTEROP_LOG", "WARNING").upper(), stream=sys.stderr)
    watch_connections(os.environ.get("INTEROP_TRACE"))
    if ARGS.mode == "worker":
        asyncio.run(worker())
        return 0
    return asyncio.run(invoke())


if __name__ == "__main__":
    sys.exit(main())
