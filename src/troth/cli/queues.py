"""``troth queues list|get``: the queues a server keeps, and how each stands now.

``list`` is ``queue.search`` (each queue's limits, running, waiting and whether its rate
holds the line back); ``get NAME`` is ``queue.get``, with the busiest keys the server lists
(docs/queues.md, "Seeing queues"). Queues are declared in code (``app.queue``), so there is
nothing here to change them.
"""

from __future__ import annotations

import argparse

from rich.console import Group, RenderableType

from troth.cli import output
from troth.cli.errors import Exit
from troth.cli.target import Commands, Target, connected, options, paged, subject
from troth.protocol.kinds import Kind
from troth.protocol.queues import (
    QueueGetRequest,
    QueueRecord,
    QueueSearchRequest,
    QueueSpec,
    Rate,
)


def register(commands: Commands) -> None:
    queues = subject(commands, "queues", "list queues and see how one stands")
    shared = [options()]

    listing = queues.add_parser("list", parents=shared, help="every queue, by name")
    paged(listing)
    listing.set_defaults(run=connected(_list))

    get = queues.add_parser("get", parents=shared, help="one queue and its busiest keys")
    get.add_argument("name")
    get.set_defaults(run=connected(_get))


async def _list(target: Target, args: argparse.Namespace) -> int:
    request = QueueSearchRequest(limit=args.limit, cursor=args.cursor)
    body = await target.call(Kind.QUEUE_SEARCH, request, "queue search")
    data = {"queues": [output.wire(q) for q in body.queues], "cursor": body.cursor}
    output.emit(args, data, lambda: output.page(_table(body.queues), body.cursor))
    return Exit.OK


async def _get(target: Target, args: argparse.Namespace) -> int:
    body = await target.call(Kind.QUEUE_GET, QueueGetRequest(args.name), f"queue {args.name!r}")
    queue: QueueRecord = body.queue
    output.emit(args, output.wire(queue), lambda: _details(queue))
    return Exit.OK


def _details(queue: QueueRecord) -> RenderableType:
    fields = output.fields(
        [
            ("name", queue.spec.name),
            ("limits", limits(queue.spec)),
            ("running", str(queue.running)),
            ("waiting", str(queue.waiting)),
            ("limited until", output.instant(queue.limited_until)),
        ]
    )
    if not queue.keys:
        return fields
    rows = [
        (k.key or "(empty key)", str(k.running), str(k.waiting), output.instant(k.limited_until))
        for k in queue.keys
    ]
    keys = output.table(["key", "running", "waiting", "limited until"], rows)
    return Group(fields, "busiest keys:", keys)


def _table(queues: list[QueueRecord]) -> RenderableType:
    rows = [
        (
            q.spec.name,
            limits(q.spec),
            str(q.running),
            str(q.waiting),
            output.instant(q.limited_until),
        )
        for q in queues
    ]
    return output.table(["queue", "limits", "running", "waiting", "limited until"], rows)


def limits(spec: QueueSpec) -> str:
    """A queue's limits in one line: ``concurrency 4, per key 1, rate 50/30000 ms``."""
    parts = []
    if spec.concurrency is not None:
        parts.append(f"concurrency {spec.concurrency}")
    if spec.key_concurrency is not None:
        parts.append(f"per key {spec.key_concurrency}")
    if spec.rate is not None:
        parts.append(f"rate {_rate(spec.rate)}")
    if spec.key_rate is not None:
        parts.append(f"key rate {_rate(spec.key_rate)}")
    if spec.priority:
        parts.append("priority")
    return ", ".join(parts) or "none"


def _rate(rate: Rate) -> str:
    return f"{rate.limit}/{rate.period} ms"
