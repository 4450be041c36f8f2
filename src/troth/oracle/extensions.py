"""The extensions to the Lean machine: the reference server's search and preload, and
troth's ``task.fences``.

Lean answers the three searches with 501 and leaves every ``preload`` empty. troth defines
both in docs/semantics.md; they live here, apart from the transliterated handlers, and read
stored state only (no projection). ``task.fences`` is defined there as a sequence of Lean's
own T-04, and is built here from it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import msgspec

from troth.oracle import tasks
from troth.oracle.state import ServerState
from troth.protocol.kinds import Kind
from troth.protocol.limits import MAX_PAGE_BYTES, record_bytes
from troth.protocol.records import BRANCH, PromiseRecord, PromiseState, Tags, TaskState
from troth.protocol.requests import (
    PromiseSearchRequest,
    ScheduleSearchRequest,
    TaskFenceRequest,
    TaskFencesRequest,
    TaskSearchRequest,
)
from troth.protocol.responses import (
    PromiseSearchResponse,
    Reply,
    ScheduleSearchResponse,
    TaskClaimResponse,
    TaskFenceResult,
    TaskFencesResult,
    TaskSearchResponse,
    TaskSuspendedResponse,
)

DEFAULT_LIMIT = 100

Row = TypeVar("Row")


# -- search ---------------------------------------------------------------------------------


def _contains(tags: Tags, wanted: Tags | None) -> bool:
    return wanted is None or all(tags.get(k) == v for k, v in wanted.items())


def _page(
    rows: Sequence[Row], id_of: Callable[[Row], str], limit: int | None, cursor: str | None
) -> tuple[list[Row], str | None]:
    """Rows sorted by id after ``cursor``, at most ``limit`` of them, and no more than fit in
    ``MAX_PAGE_BYTES`` of JSON (but at least one); the next cursor if more remain."""
    ordered = sorted(rows, key=id_of)
    if cursor is not None:
        ordered = [r for r in ordered if id_of(r) > cursor]
    size = DEFAULT_LIMIT if limit is None else limit
    page = ordered[:size]
    total = 0
    for end, row in enumerate(page):
        total += record_bytes(row)
        if end > 0 and total > MAX_PAGE_BYTES:
            page = page[:end]
            break
    more = len(ordered) > len(page)
    return page, (id_of(page[-1]) if more else None)


def promise_search(s: ServerState, req: PromiseSearchRequest, now: int) -> Reply:
    records = [
        p.to_record()
        for p in s.promises
        if (req.state is None or p.state == req.state) and _contains(p.tags, req.tags)
    ]
    page, cursor = _page(records, lambda r: r.id, req.limit, req.cursor)
    return Reply(200, PromiseSearchResponse(page, cursor))


def task_search(s: ServerState, req: TaskSearchRequest, now: int) -> Reply:
    records = [t.to_record() for t in s.tasks if req.state is None or t.state == req.state]
    page, cursor = _page(records, lambda r: r.id, req.limit, req.cursor)
    return Reply(200, TaskSearchResponse(page, cursor))


def schedule_search(s: ServerState, req: ScheduleSearchRequest, now: int) -> Reply:
    rows = [sch for sch in s.schedules if _contains(sch.promise_tags, req.tags)]
    page, cursor = _page(rows, lambda r: r.id, req.limit, req.cursor)
    return Reply(200, ScheduleSearchResponse(page, cursor))


# -- task.fences ----------------------------------------------------------------------------


def task_fences(s: ServerState, req: TaskFencesRequest, now: int) -> Reply:
    """The standard ``task.fence {id, version, action}`` of each action, in order, at one
    instant, each answered as that request would be with its preload left empty (no
    ``with_preload``); a refused fence (its message as the wire words it) does not stop the
    next."""
    fences = []
    for action in req.actions:
        reply = tasks.task_fence(s, TaskFenceRequest(req.id, req.version, action), now)
        if reply.status != 200:
            reply = Reply(reply.status, Kind.TASK_FENCE.message(reply.status))
        fences.append(reply)
    return Reply(200, TaskFencesResult(fences))


# -- preload --------------------------------------------------------------------------------


def preload(s: ServerState, task_id: str) -> list[PromiseRecord]:
    """The settled promises of the task's branch, so a worker can replay without reads.

    Every stored promise that is not ``pending`` and shares the task promise's
    ``resonate:branch`` tag, except the task's own promise, sorted by id.
    """
    own = s.get_promise(task_id)
    branch = None if own is None else own.tags.get(BRANCH)
    if branch is None:
        return []
    return sorted(
        (
            p.to_record()
            for p in s.promises
            if p.id != task_id and p.state != PromiseState.PENDING and p.tags.get(BRANCH) == branch
        ),
        key=lambda r: r.id,
    )


def with_preload(s: ServerState, task_id: str, reply: Reply) -> Reply:
    """Fill the preload of a reply that carries one (computed after the handler ran).

    ``task.create`` fills it only when it answers an acquired task; a fence only on its 200;
    a suspend only on its 300. Every other reply passes through unchanged.
    """
    body = reply.body
    if isinstance(body, TaskClaimResponse):
        if body.task is None or body.task.state != TaskState.ACQUIRED:
            return reply
        return Reply(reply.status, msgspec.structs.replace(body, preload=preload(s, task_id)))
    if isinstance(body, TaskFenceResult):
        return Reply(reply.status, body._replace(preload=preload(s, task_id)))
    if isinstance(body, TaskSuspendedResponse):
        return Reply(reply.status, TaskSuspendedResponse(preload=preload(s, task_id)))
    return reply
