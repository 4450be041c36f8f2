"""From a decoded request to its handler: the engine's one entry point per kind."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from troth.engine import promises, queues, schedules, search, tasks
from troth.engine.store import Store
from troth.protocol.envelope import Request
from troth.protocol.kinds import Kind
from troth.protocol.responses import Reply

Handler = Callable[[Store, Any, int], Reply]

HANDLERS: dict[Kind, Handler] = {
    Kind.PROMISE_GET: promises.promise_get,
    Kind.PROMISE_CREATE: promises.promise_create,
    Kind.PROMISE_SETTLE: promises.promise_settle,
    Kind.PROMISE_REGISTER_CALLBACK: promises.promise_register_callback,
    Kind.PROMISE_REGISTER_LISTENER: promises.promise_register_listener,
    Kind.PROMISE_SEARCH: search.promise_search,
    Kind.TASK_GET: tasks.task_get,
    Kind.TASK_CREATE: tasks.task_create,
    Kind.TASK_ACQUIRE: tasks.task_acquire,
    Kind.TASK_FENCE: tasks.task_fence,
    Kind.TASK_FENCES: tasks.task_fences,
    Kind.TASK_HEARTBEAT: tasks.task_heartbeat,
    Kind.TASK_SUSPEND: tasks.task_suspend,
    Kind.TASK_FULFILL: tasks.task_fulfill,
    Kind.TASK_RELEASE: tasks.task_release,
    Kind.TASK_HALT: tasks.task_halt,
    Kind.TASK_CONTINUE: tasks.task_continue,
    Kind.TASK_SEARCH: search.task_search,
    Kind.SCHEDULE_GET: schedules.schedule_get,
    Kind.SCHEDULE_CREATE: schedules.schedule_create,
    Kind.SCHEDULE_DELETE: schedules.schedule_delete,
    Kind.SCHEDULE_SEARCH: search.schedule_search,
    Kind.QUEUE_SET: queues.queue_set,
    Kind.QUEUE_GET: queues.queue_get,
    Kind.QUEUE_SEARCH: queues.queue_search,
}

# Kinds that never write: a backend may answer them outside the write path.
READ_ONLY: frozenset[Kind] = frozenset(
    {
        Kind.PROMISE_GET,
        Kind.PROMISE_SEARCH,
        Kind.TASK_GET,
        Kind.TASK_SEARCH,
        Kind.SCHEDULE_GET,
        Kind.SCHEDULE_SEARCH,
        Kind.QUEUE_GET,
        Kind.QUEUE_SEARCH,
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
