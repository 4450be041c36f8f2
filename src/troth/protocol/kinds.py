"""The 30 request kinds (the protocol's 26, troth's ``task.fences`` and its three queue
kinds), and what each one
is: its data type, its extra checks, the typed responses of its success statuses, and the
messages of its error statuses.

``Kind`` is a ``StrEnum``: a member is its wire name (``Kind.PROMISE_CREATE ==
"promise.create"``), so it goes into an envelope, a dict key or a log line as the string
the protocol spells. Everything else about a kind is in one row of ``_SPECS`` below.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, NamedTuple

from troth.protocol import queues as qu
from troth.protocol import requests as rq
from troth.protocol import responses as rs
from troth.protocol import validation as v


class Kind(StrEnum):
    """A request kind; its value is the kind's name on the wire."""

    PROMISE_GET = "promise.get"
    PROMISE_CREATE = "promise.create"
    PROMISE_SETTLE = "promise.settle"
    PROMISE_REGISTER_CALLBACK = "promise.register_callback"
    PROMISE_REGISTER_LISTENER = "promise.register_listener"
    PROMISE_SEARCH = "promise.search"
    TASK_GET = "task.get"
    TASK_CREATE = "task.create"
    TASK_ACQUIRE = "task.acquire"
    TASK_RELEASE = "task.release"
    TASK_FULFILL = "task.fulfill"
    TASK_SUSPEND = "task.suspend"
    TASK_FENCE = "task.fence"
    TASK_FENCES = "task.fences"
    TASK_HEARTBEAT = "task.heartbeat"
    TASK_HALT = "task.halt"
    TASK_CONTINUE = "task.continue"
    TASK_SEARCH = "task.search"
    SCHEDULE_GET = "schedule.get"
    SCHEDULE_CREATE = "schedule.create"
    SCHEDULE_DELETE = "schedule.delete"
    SCHEDULE_SEARCH = "schedule.search"
    QUEUE_SET = "queue.set"
    QUEUE_GET = "queue.get"
    QUEUE_SEARCH = "queue.search"
    DEBUG_START = "debug.start"
    DEBUG_STOP = "debug.stop"
    DEBUG_RESET = "debug.reset"
    DEBUG_SNAP = "debug.snap"
    DEBUG_TICK = "debug.tick"

    @classmethod
    def named(cls, name: str) -> Kind | None:
        """The kind whose wire name is ``name``; None if no kind is. The envelope asks once
        per request: a dict lookup, not ``Kind(name)`` and its ``ValueError``."""
        return _NAMED.get(name)

    @property
    def data(self) -> type[rq.Data]:
        """The type of the request's ``data``."""
        return _SPECS[self].data

    @property
    def validate(self) -> v.Validator | None:
        """The checks of the request's data that its type cannot express."""
        return _SPECS[self].validate

    @property
    def responses(self) -> dict[int, Any]:
        """The type of the response's ``data`` for each success status (200, and 300)."""
        return _SPECS[self].responses

    @property
    def debug(self) -> bool:
        """A ``debug.*`` kind: answered by the server itself, outside the machine."""
        return self.startswith("debug.")

    def message(self, status: int) -> str:
        """The error string for a status a handler returned without a body."""
        return _SPECS[self].errors.message(status)


_NAMED: dict[str, Kind] = {kind.value: kind for kind in Kind}


class Errors(NamedTuple):
    """The messages of a kind's error statuses, as the reference server words them."""

    not_found: str = "Not found"
    conflict: str = "Conflict"
    unprocessable: str = "Unprocessable"

    def message(self, status: int) -> str:
        return {404: self.not_found, 409: self.conflict, 422: self.unprocessable}.get(
            status, failed(status)
        )


def failed(status: int) -> str:
    """The message of an error status that no kind words (or of a kind no one knows)."""
    return f"Request failed with status {status}"


class _Spec(NamedTuple):
    data: type[rq.Data]
    responses: dict[int, Any]
    validate: v.Validator | None = None
    errors: Errors = Errors()


def _ok(body: Any) -> dict[int, Any]:
    return {200: body}


_TASK_CONFLICT = "Task is not in a state that allows this, or the version does not match"
_PROMISE = Errors(not_found="Promise not found")
_TASK = Errors(not_found="Task not found", conflict=_TASK_CONFLICT)
_SCHEDULE = Errors(not_found="Schedule not found")
_DEBUG = _Spec(rq.DebugRequest, _ok(rs.Empty))

_SPECS: dict[Kind, _Spec] = {
    Kind.PROMISE_GET: _Spec(rq.PromiseGetRequest, _ok(rs.PromiseResponse), v.lookup, _PROMISE),
    Kind.PROMISE_CREATE: _Spec(rq.PromiseCreateRequest, _ok(rs.PromiseResponse), v.promise_create),
    Kind.PROMISE_SETTLE: _Spec(
        rq.PromiseSettleRequest, _ok(rs.PromiseResponse), v.lookup, _PROMISE
    ),
    Kind.PROMISE_REGISTER_CALLBACK: _Spec(
        rq.PromiseRegisterCallbackRequest,
        _ok(rs.PromiseResponse),
        v.register_callback,
        Errors(
            not_found="Awaited promise not found",
            unprocessable="Awaiter promise not found or has no resonate:target tag",
        ),
    ),
    Kind.PROMISE_REGISTER_LISTENER: _Spec(
        rq.PromiseRegisterListenerRequest,
        _ok(rs.PromiseResponse),
        v.register_listener,
        Errors(not_found="Awaited promise not found"),
    ),
    Kind.PROMISE_SEARCH: _Spec(rq.PromiseSearchRequest, _ok(rs.PromiseSearchResponse), v.search),
    Kind.TASK_GET: _Spec(
        rq.TaskGetRequest, _ok(rs.TaskGetResponse), v.lookup, Errors(not_found="Task not found")
    ),
    Kind.TASK_CREATE: _Spec(
        rq.TaskCreateRequest,
        _ok(rs.TaskClaimResponse),
        v.task_create,
        Errors(
            conflict="Already exists",
            unprocessable="The promise does not have a resonate:target tag",
        ),
    ),
    Kind.TASK_ACQUIRE: _Spec(
        rq.TaskAcquireRequest, _ok(rs.TaskClaimResponse), v.task_acquire, _TASK
    ),
    Kind.TASK_RELEASE: _Spec(rq.TaskReleaseRequest, _ok(rs.Empty), v.lookup, _TASK),
    Kind.TASK_FULFILL: _Spec(rq.TaskFulfillRequest, _ok(rs.PromiseResponse), v.task_fulfill, _TASK),
    Kind.TASK_SUSPEND: _Spec(
        rq.TaskSuspendRequest,
        {200: rs.Empty, 300: rs.TaskSuspendedResponse},
        v.task_suspend,
        _TASK._replace(unprocessable="Awaited promise not found"),
    ),
    # The wire form; ``envelope.decode_response`` reads its nested action by the action's kind.
    Kind.TASK_FENCE: _Spec(rq.TaskFenceRequest, _ok(rs.TaskFenceResponse), v.task_fence, _TASK),
    # troth's extension; each fence's reply is read as a task.fence response envelope.
    Kind.TASK_FENCES: _Spec(rq.TaskFencesRequest, _ok(rs.TaskFencesResponse), v.task_fences),
    Kind.TASK_HEARTBEAT: _Spec(rq.TaskHeartbeatRequest, _ok(rs.Empty), v.task_heartbeat),
    Kind.TASK_HALT: _Spec(
        rq.TaskHaltRequest,
        _ok(rs.Empty),
        v.lookup,
        Errors(not_found="Task not found", conflict="Task is fulfilled"),
    ),
    Kind.TASK_CONTINUE: _Spec(
        rq.TaskContinueRequest,
        _ok(rs.Empty),
        v.lookup,
        Errors(not_found="Task not found", conflict="Task is not halted"),
    ),
    Kind.TASK_SEARCH: _Spec(rq.TaskSearchRequest, _ok(rs.TaskSearchResponse), v.search),
    Kind.SCHEDULE_GET: _Spec(rq.ScheduleGetRequest, _ok(rs.ScheduleResponse), v.lookup, _SCHEDULE),
    Kind.SCHEDULE_CREATE: _Spec(
        rq.ScheduleCreateRequest, _ok(rs.ScheduleResponse), v.schedule_create
    ),
    Kind.SCHEDULE_DELETE: _Spec(rq.ScheduleDeleteRequest, _ok(rs.Empty), v.lookup, _SCHEDULE),
    Kind.SCHEDULE_SEARCH: _Spec(rq.ScheduleSearchRequest, _ok(rs.ScheduleSearchResponse), v.search),
    # troth's queues (docs/queues.md).
    Kind.QUEUE_SET: _Spec(qu.QueueSetRequest, _ok(qu.QueueResponse), qu.queue_set),
    Kind.QUEUE_GET: _Spec(
        qu.QueueGetRequest, _ok(qu.QueueResponse), qu.queue_get, Errors(not_found="Queue not found")
    ),
    Kind.QUEUE_SEARCH: _Spec(qu.QueueSearchRequest, _ok(qu.QueueSearchResponse), v.search),
    Kind.DEBUG_START: _DEBUG,
    Kind.DEBUG_STOP: _DEBUG,
    Kind.DEBUG_RESET: _DEBUG,
    Kind.DEBUG_SNAP: _Spec(rq.DebugRequest, _ok(rs.Snapshot)),
    # The timeouts it fired are not listed: the answer is always an empty list.
    Kind.DEBUG_TICK: _Spec(rq.DebugTickRequest, _ok(list[Any])),
}

# The kinds whose fenced action may be nested in task.fence (and task.fences).
FENCE_ACTIONS: dict[Kind, type[rq.PromiseCreateRequest | rq.PromiseSettleRequest]] = {
    Kind.PROMISE_CREATE: rq.PromiseCreateRequest,
    Kind.PROMISE_SETTLE: rq.PromiseSettleRequest,
}
