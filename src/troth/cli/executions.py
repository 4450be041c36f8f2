"""``troth executions list|cancel|resume``: the executions on a server or in a database file.

``list`` pages through executions newest first (``--state``, ``--function``, ``--since``,
``--until``, ``--tag``, ``--limit``, ``--cursor``), along the store's indexes. ``cancel``
asks an execution to stop the way the SDK does (``troth.views.actions.cancel``: troth's
cooperative cancellation; an official SDK's execution has its promise canceled), and
``resume`` lets a halted execution run again (``task.continue``).
"""

from __future__ import annotations

import argparse
import datetime
import re
import time

from rich.console import RenderableType

from troth.cli import output
from troth.cli.errors import CliError, Exit, refused
from troth.cli.target import Commands, Target, connected, options, paged, subject
from troth.cli.views import not_found, reader
from troth.protocol.kinds import Kind
from troth.protocol.records import PromiseRecord, PromiseState
from troth.protocol.requests import PromiseGetRequest, TaskGetRequest
from troth.views import actions
from troth.views.executions import STATES, Execution, ExecutionQuery, QueryError

_COLUMNS = ["id", "function", "state", "created", "settled"]
_AGO = re.compile(r"(\d+)(ms|s|m|h|d)")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def register(commands: Commands) -> None:
    executions = subject(commands, "executions", "list, cancel and resume executions")
    shared = [options()]

    listing = executions.add_parser("list", parents=shared, help="executions, newest first")
    listing.add_argument("--state", choices=STATES)
    listing.add_argument("--function", help="the function they run")
    listing.add_argument(
        "--since", metavar="WHEN", help="created at or after: 1h (ago), an ISO time or ms"
    )
    listing.add_argument("--until", metavar="WHEN", help="created before: as --since")
    listing.add_argument("--tag", metavar="KEY=VALUE", help="a tag they carry")
    paged(listing)
    listing.set_defaults(run=connected(_list))

    cancel = executions.add_parser("cancel", parents=shared, help="ask an execution to stop")
    cancel.add_argument("id")
    cancel.add_argument("--reason", help="what the execution's CanceledError says")
    cancel.set_defaults(run=connected(_cancel))

    resume = executions.add_parser("resume", parents=shared, help="run a halted execution again")
    resume.add_argument("id")
    resume.set_defaults(run=connected(_resume))


async def _list(target: Target, args: argparse.Namespace) -> int:
    query = _query(args)
    views = reader(target)
    try:
        page = await views.executions(query)
    finally:
        await views.close()
    next = str(page.next) if page.next is not None else None
    data = {"executions": [e.to_json() for e in page.executions], "next": next}
    output.emit(args, data, lambda: output.page(_table(page.executions), next))
    return Exit.OK


def _query(args: argparse.Namespace) -> ExecutionQuery:
    tag = None
    if args.tag is not None:
        key, equals, value = args.tag.partition("=")
        if not (equals and key):
            raise CliError(f"--tag: expected KEY=VALUE, got {args.tag!r}", Exit.USAGE)
        tag = (key, value)
    try:
        return ExecutionQuery.parse(
            {
                name: value
                for name, value in {
                    "state": args.state,
                    "function": args.function,
                    "tag": f"{tag[0]}:{tag[1]}" if tag else None,
                    "since": _instant("--since", args.since),
                    "until": _instant("--until", args.until),
                    "cursor": args.cursor,
                    "limit": None if args.limit is None else str(args.limit),
                }.items()
                if value is not None
            }
        )
    except QueryError as e:
        raise CliError(f"--{e}", Exit.USAGE) from e


def _instant(flag: str, text: str | None) -> str | None:
    """``text`` as ms since the epoch: a duration ago (``90s``, ``1h30m``), an ISO 8601
    time (UTC unless it says), or ms."""
    if text is None:
        return None
    if text.isdigit():
        return text
    if re.fullmatch(r"(\d+(ms|s|m|h|d))+", text):
        ago = sum(int(n) * _UNIT_MS[unit] for n, unit in _AGO.findall(text))
        return str(time.time_ns() // 1_000_000 - ago)
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise CliError(
            f"{flag}: expected a duration ago (1h, 30m), an ISO time or ms, got {text!r}",
            Exit.USAGE,
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return str(int(moment.timestamp() * 1000))


def _table(rows: list[Execution]) -> RenderableType:
    return output.table(
        _COLUMNS,
        (
            [
                e.id,
                e.function or "-",
                e.state,
                output.instant(e.created_on),
                output.instant(e.settled_on),
            ]
            for e in rows
        ),
    )


async def _cancel(target: Target, args: argparse.Namespace) -> int:
    root = await _execution(target, args.id)
    if root.state != PromiseState.PENDING:
        raise CliError(f"execution {args.id!r} has ended ({root.state.value})", Exit.CONFLICT)
    create, settle = actions.cancel(root, args.reason)
    if create is not None:
        created = await target.call(Kind.PROMISE_CREATE, create, f"promise {create.id!r}")
        if created.promise.state != PromiseState.PENDING:
            output.emit(
                args,
                {"id": args.id, "canceled": "before"},
                lambda: f"execution {args.id!r} was already asked to stop",
            )
            return Exit.OK
    await target.call(Kind.PROMISE_SETTLE, settle, f"promise {settle.id!r}")
    output.emit(
        args, {"id": args.id, "canceled": "now"}, lambda: f"asked execution {args.id!r} to stop"
    )
    return Exit.OK


async def _resume(target: Target, args: argparse.Namespace) -> int:
    await _execution(target, args.id)
    status, body = await target.send(Kind.TASK_CONTINUE, actions.resume(args.id))
    if status == 409:
        raise CliError(f"execution {args.id!r} is not halted", Exit.CONFLICT)
    if status != 200:
        raise refused(f"execution {args.id!r}", status, str(body))
    output.emit(args, {"id": args.id, "resumed": True}, lambda: f"resumed execution {args.id!r}")
    return Exit.OK


async def _execution(target: Target, id: str) -> PromiseRecord:
    """The root promise of execution ``id``; not found unless it has a task."""
    status, body = await target.send(Kind.PROMISE_GET, PromiseGetRequest(id))
    if status == 404:
        raise not_found(id)
    if status != 200:
        raise refused(f"execution {id!r}", status, str(body))
    task_status, _ = await target.send(Kind.TASK_GET, TaskGetRequest(id))
    if task_status == 404:
        raise CliError(f"{id!r} is a promise without a task, not an execution", Exit.NOT_FOUND)
    promise: PromiseRecord = body.promise
    return promise
