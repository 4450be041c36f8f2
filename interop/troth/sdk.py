"""troth's own SDK driven against a troth server, beside the official SDKs' scripts.

    python sdk.py worker --url U --group G --pid P --ttl MS [--markers FILE] [--hang-step N]
    python sdk.py invoke --url U --id ID --func NAME --target G --args JSON

Runs in troth's venv. Same command line as interop/ts/sdk.mjs and interop/py/sdk.py, so
tests/interop can start it through the same fixture and a test can make a troth workflow
call a TypeScript one (and the other way round). A worker serves its group until killed;
``invoke`` starts one function on a group through ``rpc``, prints ``RESULT <json>`` (or
``ERROR <type>: <message>``) and exits. With INTEROP_TRACE=<file> every request this
process sends and the status and body it gets back are appended to that file.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
from datetime import timedelta
from typing import Any

from troth import Context, Troth
from troth.sdk.errors import RemoteError

ARGS: argparse.Namespace


# --- functions --------------------------------------------------------------------------


async def callee(ctx: Context, x: int) -> dict[str, Any]:
    return {"pid": ARGS.pid, "value": x + 1}


async def caller(ctx: Context, target: str, x: int) -> dict[str, Any]:
    res = await ctx.options(target=target).rpc("callee", x)
    return {"pid": ARGS.pid, "callee": res}


async def echo(ctx: Context, *args: Any) -> list[Any]:
    return list(args)


async def boom(ctx: Context, message: str) -> None:
    raise ValueError(message)


async def boom_group(ctx: Context, message: str) -> None:
    raise ExceptionGroup(message, [ValueError("first"), TypeError("second")])


class PaymentDeclined(Exception):
    """An error with a custom ``__init__``: a troth process that has the class (any process
    running this script) rebuilds it with its attributes; TypeScript sees its name."""

    def __init__(self, order: str, cents: int) -> None:
        super().__init__(order, cents)
        self.order = order
        self.cents = cents

    def __str__(self) -> str:
        return f"declined {self.order} ({self.cents} cents)"


async def declined(ctx: Context, order: str, cents: int) -> None:
    raise PaymentDeclined(order, cents)


async def nothing(ctx: Context) -> None:
    return None


async def relay(ctx: Context, target: str, func: str, *args: Any) -> Any:
    """``func(*args)`` on group ``target``, its value returned as this function's own."""
    return await ctx.options(target=target).rpc(func, *args)


async def catcher(ctx: Context, target: str, func: str, *args: Any) -> dict[str, Any]:
    """``func(*args)`` on group ``target``, expected to fail: what the failure looked like."""
    try:
        value = await ctx.options(target=target).rpc(func, *args)
    except RemoteError as e:
        return {
            "class": type(e).__name__,
            "type": e.type_name,
            "message": e.message,
            "has_traceback": bool(e.remote_traceback),
            "errors": [[getattr(x, "type_name", None), str(x)] for x in e.errors],
        }
    return {"class": None, "value": value}


async def relay_then_sleep(ctx: Context, target: str, func: str, *args: Any) -> Any:
    """``relay``, then one more durable call: where a cancellation that came while the
    child ran is observed (the child itself is waited for)."""
    value = await ctx.options(target=target).rpc(func, *args)
    await ctx.sleep(0)
    return value


FUNCTIONS = [
    callee, caller, echo, boom, boom_group, declined, nothing, relay, catcher, relay_then_sleep,
]  # fmt: skip


# --- modes ------------------------------------------------------------------------------


def traced(app: Troth) -> Troth:
    """Log every request of ``app`` (kind, body, status, answer) to INTEROP_TRACE."""
    trace = os.environ.get("INTEROP_TRACE")
    if not trace:
        return app
    network = app.runtime.network
    send = network.send

    async def logged(kind: str, data: Any) -> tuple[int, Any]:
        status, body = await send(kind, data)
        with open(trace, "a") as f:
            f.write(f">>> {kind} {data!r}\n<<< {status} {body!r}\n")
        return status, body

    network.send = logged  # type: ignore[method-assign]
    return app


async def worker() -> int:
    app = Troth(url=ARGS.url, group=ARGS.group, pid=ARGS.pid, ttl=timedelta(milliseconds=ARGS.ttl))
    for fn in FUNCTIONS:
        app.register(fn, name=fn.__name__)
    traced(app)
    await app.start()
    # READY only once the server answered the poll stream, so it can deliver to us.
    await asyncio.wait_for(app.runtime.network.connected.wait(), 30)  # type: ignore[attr-defined]
    print(f"READY {ARGS.pid}", flush=True)
    await asyncio.Event().wait()
    return 0


async def invoke() -> int:
    app = traced(Troth(url=ARGS.url, group=f"client-{os.getpid()}"))
    async with app:
        handle = app.options(target=ARGS.target).rpc(ARGS.id, ARGS.func, *json.loads(ARGS.args))
        try:
            result = await handle.result()
        except Exception as exc:  # the test reads the message, so any failure is reported
            print(f"ERROR {type(exc).__name__}: {exc}", flush=True)
            return 1
    print(f"RESULT {json.dumps(result)}", flush=True)
    return 0


def main() -> int:
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["worker", "invoke"])
    parser.add_argument("--url", required=True)
    parser.add_argument("--group", default="default")
    parser.add_argument("--pid", default=f"troth-{os.getpid()}")
    parser.add_argument("--ttl", type=int, default=60_000)
    parser.add_argument("--markers", default=os.devnull)
    parser.add_argument("--hang-step", type=int, default=0)
    parser.add_argument("--id")
    parser.add_argument("--func")
    parser.add_argument("--target")
    parser.add_argument("--args", default="[]")
    ARGS = parser.parse_args()
    logging.basicConfig(level=os.environ.get("INTEROP_LOG", "WARNING").upper(), stream=sys.stderr)
    return asyncio.run(worker() if ARGS.mode == "worker" else invoke())


if __name__ == "__main__":
    sys.exit(main())
