"""``troth promises get|search|create|resolve|reject|cancel``: durable promises by hand.

Values are given as JSON and encoded as the SDK's default codec encodes them, so a workflow
awaiting the promise (``ctx.promise``) reads what was given; values are shown decoded.
Settling a promise that is already settled changes nothing: the command then says so and
exits 6 (conflict) rather than report a settlement it did not make.
"""

from __future__ import annotations

import argparse

from rich.console import RenderableType

from troth.cli import inputs, output
from troth.cli.errors import CliError, Exit
from troth.cli.output import value_text
from troth.cli.target import Commands, Target, connected, options, paged, subject
from troth.protocol.kinds import Kind
from troth.protocol.records import PromiseRecord, PromiseState, SettleState, Value
from troth.protocol.requests import (
    PromiseCreateRequest,
    PromiseGetRequest,
    PromiseSearchRequest,
    PromiseSettleRequest,
)
from troth.sdk.options import NO_DEADLINE
from troth.views.values import shown

_SETTLE = {
    "resolve": SettleState.RESOLVED,
    "reject": SettleState.REJECTED,
    "cancel": SettleState.REJECTED_CANCELED,
}


def register(commands: Commands) -> None:
    promises = subject(commands, "promises", "get, search, create and settle promises")
    shared = [options()]

    get = promises.add_parser("get", parents=shared, help="one promise, its values decoded")
    get.add_argument("id")
    get.set_defaults(run=connected(_get))

    search = promises.add_parser("search", parents=shared, help="promises by state and tags")
    search.add_argument("--state", choices=[s.value for s in PromiseState])
    inputs.tags(search, "only promises with this tag")
    paged(search)
    search.set_defaults(run=connected(_search))

    create = promises.add_parser("create", parents=shared, help="create a pending promise")
    create.add_argument("id")
    create.add_argument(
        "--timeout",
        type=inputs.duration_ms,
        metavar="DURATION",
        help="its deadline, from now: 500ms, 30s, 5m, 2h, 1d [default: none]",
    )
    create.add_argument("--param", type=inputs.json_text, metavar="JSON", help="its param")
    inputs.headers(create, "param")
    inputs.tags(create, "a tag")
    create.set_defaults(run=connected(_create))

    for action, state in _SETTLE.items():
        settle = promises.add_parser(action, parents=shared, help=f"settle a promise {state}")
        settle.add_argument("id")
        settle.add_argument("--value", type=inputs.json_text, metavar="JSON", help="its value")
        inputs.headers(settle, "value")
        settle.set_defaults(run=connected(_settle), state=state)


async def _get(target: Target, args: argparse.Namespace) -> int:
    body = await target.call(Kind.PROMISE_GET, PromiseGetRequest(args.id), f"promise {args.id!r}")
    show(args, body.promise)
    return Exit.OK


async def _search(target: Target, args: argparse.Namespace) -> int:
    request = PromiseSearchRequest(
        state=args.state, tags=dict(args.tag) or None, limit=args.limit, cursor=args.cursor
    )
    body = await target.call(Kind.PROMISE_SEARCH, request, "promise search")
    data = {"promises": [promise_json(p) for p in body.promises], "cursor": body.cursor}
    output.emit(args, data, lambda: _listing(body.promises, body.cursor))
    return Exit.OK


async def _create(target: Target, args: argparse.Namespace) -> int:
    timeout_at = NO_DEADLINE if args.timeout is None else target.now() + args.timeout
    param = inputs.value(args.param, args.header)
    request = PromiseCreateRequest(args.id, timeout_at, param, dict(args.tag))
    body = await target.call(Kind.PROMISE_CREATE, request, f"promise {args.id!r}")
    show(args, body.promise)
    return Exit.OK


async def _settle(target: Target, args: argparse.Namespace) -> int:
    value = inputs.value(args.value, args.header)
    request = PromiseSettleRequest(args.id, args.state, value)
    body = await target.call(Kind.PROMISE_SETTLE, request, f"promise {args.id!r}")
    show(args, body.promise)
    settled = body.promise
    if settled.state != args.state or not _same(settled.value, value):
        # A settled promise keeps its first outcome: the same one again is idempotent, any
        # other is a conflict, named in full so the operator sees what won.
        raise CliError(
            f"promise {args.id!r} was already {settled.state} with {value_text(settled.value)};"
            f" not {args.state} with {value_text(value)}",
            Exit.CONFLICT,
        )
    return Exit.OK


def _same(a: Value, b: Value) -> bool:
    """Whether two values hold the same thing: equal JSON when both hold JSON (however their
    headers spell the codec), else equal as stored."""
    seen_a, seen_b = shown(a), shown(b)
    if seen_a.decoded and seen_b.decoded:
        return bool(seen_a.data == seen_b.data)
    return a == b or (seen_a.empty and seen_b.empty)


def promise_json(promise: PromiseRecord) -> dict[str, object]:
    data = output.wire(promise)
    data["param"] = output.value_json(promise.param)
    data["value"] = output.value_json(promise.value)
    return data


def show(args: argparse.Namespace, promise: PromiseRecord) -> None:
    output.emit(args, promise_json(promise), lambda: _details(promise))


def _details(promise: PromiseRecord) -> RenderableType:
    return output.fields(
        [
            ("id", promise.id),
            ("state", promise.state),
            ("param", output.value_text(promise.param)),
            ("value", output.value_text(promise.value)),
            ("tags", output.tags(promise.tags)),
            ("created", output.instant(promise.created_at)),
            ("settled", output.instant(promise.settled_at)),
            ("timeout", output.instant(promise.timeout_at)),
        ]
    )


def _listing(promises: list[PromiseRecord], cursor: str | None) -> RenderableType:
    rows = [
        (p.id, p.state, output.instant(p.created_at), output.instant(p.settled_at))
        for p in promises
    ]
    return output.page(output.table(["id", "state", "created", "settled"], rows), cursor)
