"""Search (an extension of the reference server, not in Lean; Lean answers 501).

Records are the stored ones, without projection: search is a listing of storage, and the
``state`` filter matches stored state. Pages are ordered by id; the cursor is the id of
the last record of the page and appears only when more records follow.

A page ends at ``limit`` records or where its records' JSON would pass
``MAX_PAGE_BYTES``, whichever comes first (its first record always fits, so paging
progresses). The store yields rows as they are read, and reading stops with the page, so
a search over large payloads holds one page in memory, not ``limit`` records.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from typing import Any, Protocol, TypeVar

from troth.engine.store import Store, Task
from troth.protocol.limits import MAX_PAGE_BYTES, record_bytes
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


def _page(rows: Iterable[T], limit: int, wire: Callable[[T], Any]) -> tuple[list[T], str | None]:
    """The page: rows while they fit ``limit`` and ``MAX_PAGE_BYTES`` (``wire`` gives the
    record a row is answered as); the cursor of the next page if a row was left out."""
    page: list[T] = []
    size = 0
    for row in rows:
        size += record_bytes(wire(row))
        if len(page) == limit or (page and size > MAX_PAGE_BYTES):
            return page, page[-1].id
        page.append(row)
    return page, None


def _same(row: T) -> T:
    return row


def promise_search(store: Store, req: PromiseSearchRequest, now: int) -> Reply:
    limit = req.limit or DEFAULT_LIMIT
    rows = store.search_promises(req.state, req.tags or {}, req.cursor, limit + 1)
    with contextlib.closing(rows):
        page, cursor = _page(rows, limit, _same)
    return Reply(200, PromiseSearchResponse(page, cursor))


def task_search(store: Store, req: TaskSearchRequest, now: int) -> Reply:
    limit = req.limit or DEFAULT_LIMIT
    with contextlib.closing(store.search_tasks(req.state, req.cursor, limit + 1)) as rows:
        page, cursor = _page(rows, limit, Task.record)
    return Reply(200, TaskSearchResponse([task.record() for task in page], cursor))


def schedule_search(store: Store, req: ScheduleSearchRequest, now: int) -> Reply:
    limit = req.limit or DEFAULT_LIMIT
    with contextlib.closing(store.search_schedules(req.tags or {}, req.cursor, limit + 1)) as rows:
        page, cursor = _page(rows, limit, _same)
    return Reply(200, ScheduleSearchResponse(page, cursor))
