"""``troth schedules create|get|search|delete``: cron schedules that create promises.

A schedule starts a registered function on a worker group at each cron occurrence, as
execution ``<id>.<timestamp>``. ``create`` is the SDK's ``app.schedules.create`` (with the
options of ``troth invoke``), so the promises it makes are the ones a program's schedule
makes and any worker of the group runs them.
"""

from __future__ import annotations

import argparse

from rich.console import RenderableType

from troth.cli import inputs, invoke, output
from troth.cli.errors import Exit
from troth.cli.target import Commands, Target, connected, options, paged, subject
from troth.protocol.kinds import Kind
from troth.protocol.records import Schedule
from troth.protocol.requests import (
    ScheduleDeleteRequest,
    ScheduleGetRequest,
    ScheduleSearchRequest,
)
from troth.sdk.options import NO_DEADLINE


def register(commands: Commands) -> None:
    schedules = subject(commands, "schedules", "create, get, search and delete schedules")
    shared = [options()]

    create = schedules.add_parser(
        "create", parents=shared, help="start a registered function at every cron occurrence"
    )
    create.add_argument("id")
    create.add_argument("--cron", required=True, help="when, e.g. '*/5 * * * *' (UTC)")
    create.add_argument("--func", required=True, help="the function's registered name")
    invoke.start_options(create)
    create.set_defaults(run=connected(_create))

    get = schedules.add_parser("get", parents=shared, help="one schedule")
    get.add_argument("id")
    get.set_defaults(run=connected(_get))

    search = schedules.add_parser("search", parents=shared, help="schedules by tags")
    inputs.tags(search, "only schedules whose promises have this tag")
    paged(search)
    search.set_defaults(run=connected(_search))

    delete = schedules.add_parser("delete", parents=shared, help="delete a schedule")
    delete.add_argument("id")
    delete.set_defaults(run=connected(_delete))


async def _create(target: Target, args: argparse.Namespace) -> int:
    given, arguments = invoke.start(args)
    schedules = target.app.options(**given).schedules
    _show(args, await schedules.create(args.id, args.cron, args.func, *arguments))
    return Exit.OK


async def _get(target: Target, args: argparse.Namespace) -> int:
    body = await target.call(
        Kind.SCHEDULE_GET, ScheduleGetRequest(args.id), f"schedule {args.id!r}"
    )
    _show(args, body.schedule)
    return Exit.OK


async def _search(target: Target, args: argparse.Namespace) -> int:
    request = ScheduleSearchRequest(
        tags=dict(args.tag) or None, limit=args.limit, cursor=args.cursor
    )
    body = await target.call(Kind.SCHEDULE_SEARCH, request, "schedule search")
    data = {"schedules": [_json(s) for s in body.schedules], "cursor": body.cursor}
    output.emit(args, data, lambda: output.page(_table(body.schedules), body.cursor))
    return Exit.OK


async def _delete(target: Target, args: argparse.Namespace) -> int:
    what = f"schedule {args.id!r}"
    await target.call(Kind.SCHEDULE_DELETE, ScheduleDeleteRequest(args.id), what)
    output.emit(args, {"deleted": args.id}, lambda: f"deleted {what}")
    return Exit.OK


def _json(schedule: Schedule) -> dict[str, object]:
    data = output.wire(schedule)
    data["promiseParam"] = output.value_json(schedule.promise_param)
    return data


def _show(args: argparse.Namespace, schedule: Schedule) -> None:
    output.emit(args, _json(schedule), lambda: _details(schedule))


def _details(schedule: Schedule) -> RenderableType:
    return output.fields(
        [
            ("id", schedule.id),
            ("cron", schedule.cron),
            ("promise id", schedule.promise_id),
            ("promise timeout", _timeout(schedule.promise_timeout)),
            ("promise param", output.value_text(schedule.promise_param)),
            ("promise tags", output.tags(schedule.promise_tags)),
            ("created", output.instant(schedule.created_at)),
            ("next run", output.instant(schedule.next_run_at)),
            ("last run", output.instant(schedule.last_run_at)),
        ]
    )


def _timeout(ms: int) -> str:
    # ``app.schedules`` writes "no deadline" as the longest duration that cannot overflow.
    return "none" if ms >= NO_DEADLINE // 2 else f"{ms} ms"


def _table(schedules: list[Schedule]) -> RenderableType:
    rows = [
        (s.id, s.cron, s.promise_id, output.instant(s.next_run_at), output.instant(s.last_run_at))
        for s in schedules
    ]
    return output.table(["id", "cron", "promise id", "next run", "last run"], rows)
