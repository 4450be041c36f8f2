"""The 26 request kinds: each one's data type, its extra checks and its error messages."""

from __future__ import annotations

from typing import NamedTuple

from troth.protocol import requests as rq
from troth.protocol import validation as v


class Kind(NamedTuple):
    data: type[rq.Data]
    validate: v.Validator | None = None
    not_found: str = "Not found"
    conflict: str = "Conflict"
    unprocessable: str = "Unprocessable"

    def message(self, status: int) -> str:
        """The error string for a status a handler returned without a body."""
        return {404: self.not_found, 409: self.conflict, 422: self.unprocessable}.get(
            status, f"Request failed with status {status}"
        )


_TASK_CONFLICT = "Task is not in a state that allows this, or the version does not match"

KINDS: dict[str, Kind] = {
    "promise.get": Kind(rq.PromiseGetRequest, v.lookup, not_found="Promise not found"),
    "promise.create": Kind(rq.PromiseCreateRequest, v.promise_create),
    "promise.settle": Kind(rq.PromiseSettleRequest, v.lookup, not_found="Promise not found"),
    "promise.register_callback": Kind(
        rq.PromiseRegisterCallbackRequest,
        v.register_callback,
        not_found="Awaited promise not found",
        unprocessable="Awaiter promise not found or has no resonate:target tag",
    ),
    "promise.register_listener": Kind(
        rq.PromiseRegisterListenerRequest,
        v.register_listener,
        not_found="Awaited promise not found",
    ),
    "promise.search": Kind(rq.PromiseSearchRequest, v.search),
    "task.get": Kind(rq.TaskGetRequest, v.lookup, not_found="Task not found"),
    "task.create": Kind(
        rq.TaskCreateRequest,
        v.task_create,
        conflict="Already exists",
        unprocessable="The promise does not have a resonate:target tag",
    ),
    "task.acquire": Kind(
        rq.TaskAcquireRequest, v.task_acquire, not_found="Task not found", conflict=_TASK_CONFLICT
    ),
    "task.release": Kind(
        rq.TaskReleaseRequest, v.lookup, not_found="Task not found", conflict=_TASK_CONFLICT
    ),
    "task.fulfill": Kind(
        rq.TaskFulfillRequest, v.task_fulfill, not_found="Task not found", conflict=_TASK_CONFLICT
    ),
    "task.suspend": Kind(
        rq.TaskSuspendRequest,
        v.task_suspend,
        not_found="Task not found",
        conflict=_TASK_CONFLICT,
        unprocessable="Awaited promise not found",
    ),
    "task.fence": Kind(
        rq.TaskFenceRequest, v.task_fence, not_found="Task not found", conflict=_TASK_CONFLICT
    ),
    "task.heartbeat": Kind(rq.TaskHeartbeatRequest, v.task_heartbeat),
    "task.halt": Kind(
        rq.TaskHaltRequest, v.lookup, not_found="Task not found", conflict="Task is fulfilled"
    ),
    "task.continue": Kind(
        rq.TaskContinueRequest, v.lookup, not_found="Task not found", conflict="Task is not halted"
    ),
    "task.search": Kind(rq.TaskSearchRequest, v.search),
    "schedule.get": Kind(rq.ScheduleGetRequest, v.lookup, not_found="Schedule not found"),
    "schedule.create": Kind(rq.ScheduleCreateRequest, v.schedule_create),
    "schedule.delete": Kind(rq.ScheduleDeleteRequest, v.lookup, not_found="Schedule not found"),
    "schedule.search": Kind(rq.ScheduleSearchRequest, v.search),
    "debug.start": Kind(rq.DebugRequest),
    "debug.stop": Kind(rq.DebugRequest),
    "debug.reset": Kind(rq.DebugRequest),
    "debug.snap": Kind(rq.DebugRequest),
    "debug.tick": Kind(rq.DebugTickRequest),
}

# The kinds whose fenced action may be nested in task.fence.
FENCE_ACTIONS: dict[str, type[rq.PromiseCreateRequest | rq.PromiseSettleRequest]] = {
    "promise.create": rq.PromiseCreateRequest,
    "promise.settle": rq.PromiseSettleRequest,
}
