"""``troth tasks get|search|halt|continue``: the tasks that run executions on workers.

``halt`` stops a task from being run again until ``continue`` (what the SDK does itself
when a replay diverges from the recorded steps); ``continue`` lets a halted task be
dispatched to its worker group again. Either on a task not in a state that allows it exits
6 (conflict).
"""

from __future__ import annotations

import argparse

from rich.console import RenderableType

from troth.cli import output
from troth.cli.errors import Exit
from troth.cli.target import Commands, Target, connected, options, paged, subject
from troth.protocol.kinds import Kind
from troth.protocol.records import TaskRecord, TaskState
from troth.protocol.requests import (
    TaskContinueRequest,
    TaskGetRequest,
    TaskHaltRequest,
    TaskSearchRequest,
)

_COLUMNS = ["id", "state", "version", "resumes", "pid", "ttl (ms)"]


def register(commands: Commands) -> None:
    tasks = subject(commands, "tasks", "get, search, halt and continue tasks")
    shared = [options()]

    get = tasks.add_parser("get", parents=shared, help="one task")
    get.add_argument("id")
    get.set_defaults(run=connected(_get))

    search = tasks.add_parser("search", parents=shared, help="tasks by state")
    search.add_argument("--state", choices=[s.value for s in TaskState])
    paged(search)
    search.set_defaults(run=connected(_search))

    halt = tasks.add_parser("halt", parents=shared, help="stop a task until it is continued")
    halt.add_argument("id")
    halt.set_defaults(run=connected(_halt))

    resume = tasks.add_parser("continue", parents=shared, help="let a halted task run again")
    resume.add_argument("id")
    resume.set_defaults(run=connected(_continue))


async def _get(target: Target, args: argparse.Namespace) -> int:
    _show(args, await _task(target, args.id))
    return Exit.OK


async def _search(target: Target, args: argparse.Namespace) -> int:
    request = TaskSearchRequest(state=args.state, limit=args.limit, cursor=args.cursor)
    body = await target.call(Kind.TASK_SEARCH, request, "task search")
    data = {"tasks": [output.wire(t) for t in body.tasks], "cursor": body.cursor}
    output.emit(args, data, lambda: output.page(_table(body.tasks), body.cursor))
    return Exit.OK


async def _halt(target: Target, args: argparse.Namespace) -> int:
    await target.call(Kind.TASK_HALT, TaskHaltRequest(args.id), f"task {args.id!r}")
    _show(args, await _task(target, args.id))
    return Exit.OK


async def _continue(target: Target, args: argparse.Namespace) -> int:
    await target.call(Kind.TASK_CONTINUE, TaskContinueRequest(args.id), f"task {args.id!r}")
    _show(args, await _task(target, args.id))
    return Exit.OK


async def _task(target: Target, id: str) -> TaskRecord:
    body = await target.call(Kind.TASK_GET, TaskGetRequest(id), f"task {id!r}")
    task: TaskRecord = body.task
    return task


def _show(args: argparse.Namespace, task: TaskRecord) -> None:
    output.emit(args, output.wire(task), lambda: _table([task]))


def _table(tasks: list[TaskRecord]) -> RenderableType:
    rows = [
        (t.id, t.state, str(t.version), str(t.resumes), t.pid or "-", str(t.ttl or "-"))
        for t in tasks
    ]
    return output.table(_COLUMNS, rows)
