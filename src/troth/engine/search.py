"""Search (an extension of the reference server, not in Lean; Lean answers 501).

Records are the stored ones, without projection: search is a listing of storage, and the
``state`` filter matches stored state. Pages are ordered by id; the cursor is the id of
the last record of the page and appears only when more records follow.
"""

from __future__ import annotations

from typing import Protocol, TypeVar

from troth.engine.store import Store
from troth.protocol.requests import (
    PromiseSearchRequest,
    ScheduleSearchRequest,
    TaskSearchRequest,
)
from troth.protocol.responses import (
    PromiseSearchResponse,
    Reply,
    ScheduleSearchResponse,
    TaskSearchResponse,
)

DEFAULT_LIMIT = 100


class _Identified(Protocol):
    @property
    def id(self) -> str: ...


T = TypeVar("T", bound=_Identified)


def _page(rows: list[T], limit: int) -> tuple[list[T], str | None]:
    """Split the ``limit + 1`` rows fetched into the page and the cursor of the next one."""
    if len(rows) <= limit:
        return rows, None
    return rows[:limit], rows[limit - 1].id


def promise_search(store: Store, req: PromiseSearchRequest, now: int) -> Reply:
    limit = req.limit or DEFAULT_LIMIT
    rows = store.search_promises(req.state, req.tags or {}, req.cursor, limit + 1)
    page, cursor = _page(rows, limit)
    return Reply(200, PromiseSearchResponse(page, cursor))


def task_search(store: Store, req: TaskSearchRequest, now: int) -> Reply:
    limit = req.limit or DEFAULT_LIMIT
    rows = store.search_tasks(req.state, req.cursor, limit + 1)
    page, cursor = _page(rows, limit)
    return Reply(200, TaskSearchResponse([task.record() for task in page], cursor))


def schedule_search(store: Store, req: ScheduleSearchRequest, now: int) -> Reply:
    limit = req.limit or DEFAULT_LIMIT
    rows = store.search_schedules(req.tags or {}, req.cursor, limit + 1)
    page, cursor = _page(rows, limit)
    return Reply(200, ScheduleSearchResponse(page, cursor))
