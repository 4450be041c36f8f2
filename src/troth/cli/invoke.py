"""``troth invoke FUNC --id ID``: start a registered function on a worker group.

The execution is started by the SDK's own ``app.rpc`` (an app that is never started, see
``troth.cli.target``): the same root promise, ``{func, args}`` param, tags and target as a
program's ``app.options(target=GROUP).rpc(ID, "FUNC", *args)``, so troth workers and the
official SDKs' workers run it alike, and invoking an id again with the same function and
arguments joins the execution instead of starting another (other work exits 6).

With ``--wait`` it waits for the outcome: the result printed decoded and exit 0, or exit 1
if the execution failed (rejected, canceled, timed out) or is halted.
"""

from __future__ import annotations

import argparse
from typing import Any

from troth.cli import inputs, output, promises
from troth.cli.errors import CliError, Exit
from troth.cli.target import Commands, Target, connected, options
from troth.protocol.records import PromiseState
from troth.sdk.errors import HaltedError, IdempotencyConflictError, UnstorableValueError
from troth.sdk.options import StartOptions


def register(commands: Commands) -> None:
    help = "start a registered function on a worker group"
    invoke = commands.add_parser("invoke", parents=[options()], help=help, description=help)
    invoke.add_argument("func", metavar="FUNC", help="the function's registered name")
    invoke.add_argument(
        "--id", required=True, help="the execution's id (starting it again joins it)"
    )
    start_options(invoke)
    invoke.add_argument(
        "--wait", action="store_true", help="wait for the result; exit 1 if the execution failed"
    )
    invoke.set_defaults(run=connected(_invoke))


def start_options(parser: argparse.ArgumentParser) -> None:
    """How an execution starts: its arguments, worker group, deadline and tags."""
    parser.add_argument(
        "--arg",
        type=inputs.json_text,
        action="append",
        default=[],
        metavar="JSON",
        help="the next positional argument, as JSON (repeatable)",
    )
    parser.add_argument(
        "--target",
        metavar="GROUP",
        help="the worker group to run it (env TROTH_GROUP) [default: default]",
    )
    parser.add_argument(
        "--timeout",
        type=inputs.duration_ms,
        metavar="DURATION",
        help="the execution's deadline, from its start: 500ms, 30s, 5m, 2h, 1d [default: none]",
    )
    inputs.tags(parser, "a tag of the execution's root promise")


def start(args: argparse.Namespace) -> tuple[StartOptions, list[Any]]:
    """The ``app.options(...)`` and the function's arguments that ``start_options`` read."""
    given: StartOptions = {"tags": dict(args.tag)}
    if args.target is not None:
        given["target"] = args.target
    if args.timeout is not None:
        given["timeout"] = args.timeout / 1000
    return given, [arg.data for arg in args.arg]


async def _invoke(target: Target, args: argparse.Namespace) -> int:
    given, arguments = start(args)
    handle = target.app.options(**given).rpc(args.id, args.func, *arguments)
    try:
        await handle.started()
    except IdempotencyConflictError as e:
        raise CliError(str(e), Exit.CONFLICT) from e
    except UnstorableValueError as e:
        raise CliError(str(e), Exit.USAGE) from e
    if not args.wait:
        started = {"id": args.id, "func": args.func, "started": True}
        output.emit(args, started, lambda: f"started {args.id!r} ({args.func})")
        return Exit.OK
    try:
        record = await handle.settled()
    except HaltedError as e:
        raise CliError(
            f"execution {args.id!r} is halted: {e.reason or 'no reason was recorded'} "
            f"(troth tasks continue {args.id} resumes it)",
            Exit.FAILED,
        ) from e
    promises.show(args, record)
    if record.state != PromiseState.RESOLVED:
        raise CliError(f"execution {args.id!r} {record.state}", Exit.FAILED)
    return Exit.OK
