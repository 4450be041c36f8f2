"""From a decoded request to its handler: the engine's one entry point per kind."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from troth.engine import promises, schedules, search, tasks
from troth.engine.store import Store
from troth.protocol.envelope import Request
from troth.protocol.responses import Reply

Handler = Callable[[Store, Any, int], Reply]

HANDLERS: dict[str, Handler] = {
    "promise.get": promises.promise_get,
    "promise.create": promises.promise_create,
    "promise.settle": promises.promise_settle,
    "promise.register_callback": promises.promise_register_callback,
    "promise.register_listener": promises.promise_register_listener,
    "promise.search": search.promise_search,
    "task.get": tasks.task_get,
    "task.create": tasks.task_create,
    "task.acquire": tasks.task_acquire,
    "task.fence": tasks.task_fence,
    "task.heartbeat": tasks.task_heartbeat,
    "task.suspend": tasks.task_suspend,
    "task.fulfill": tasks.task_fulfill,
    "task.release": tasks.task_release,
    "task.halt": tasks.task_halt,
    "task.continue": tasks.task_continue,
    "task.search": search.task_search,
    "schedule.get": schedules.schedule_get,
    "schedule.create": schedules.schedule_create,
    "schedule.delete": schedules.schedule_delete,
    "schedule.search": search.schedule_search,
}

# Kinds that never write: a backend may answer them outside the write path.
READ_ONLY: frozenset[str] = frozenset(
    {
        "promise.get",
        "promise.search",
        "task.get",
        "task.search",
        "schedule.get",
        "schedule.search",
    }
)


def handle(store: Store, request: Request, now: int) -> Reply:
    """Run one non-debug request at instant ``now`` against ``store``.

    The debug kinds act on the server and the storage as a whole and never reach here.
    """
    handler = HANDLERS.get(request.kind)
    if handler is None:
        raise ValueError(f"the engine does not handle {request.kind!r}")
    return handler(store, request.data, now)
