"""What a request is about: the ids of the promise, task or schedule it names.

Log lines carry these ids as fields under the names here (``promise_id``, ``task_id``,
``schedule_id``), in the server and in the SDK alike, so one filter on ``task_id`` finds a
task's lines in every process's log (docs/logging.md).
"""

from __future__ import annotations

from troth.protocol.messages import Execute, Message
from troth.protocol.requests import (
    Data,
    PromiseCreateRequest,
    PromiseGetRequest,
    PromiseRegisterCallbackRequest,
    PromiseRegisterListenerRequest,
    PromiseSettleRequest,
    ScheduleCreateRequest,
    ScheduleDeleteRequest,
    ScheduleGetRequest,
    TaskAcquireRequest,
    TaskContinueRequest,
    TaskCreateRequest,
    TaskFenceRequest,
    TaskFencesRequest,
    TaskFulfillRequest,
    TaskGetRequest,
    TaskHaltRequest,
    TaskReleaseRequest,
    TaskSuspendRequest,
)

PROMISE_ID = "promise_id"
TASK_ID = "task_id"
SCHEDULE_ID = "schedule_id"
ID_FIELDS = (PROMISE_ID, TASK_ID, SCHEDULE_ID)


def subject_ids(data: Data) -> dict[str, str]:
    """The ids a request's ``data`` names, by field; none for a search or a heartbeat."""
    match data:
        case PromiseGetRequest() | PromiseCreateRequest() | PromiseSettleRequest():
            return {PROMISE_ID: data.id}
        case PromiseRegisterCallbackRequest() | PromiseRegisterListenerRequest():
            return {PROMISE_ID: data.awaited}
        case TaskCreateRequest():
            return {TASK_ID: data.action.data.id}  # a task's id is its promise's
        case TaskFenceRequest():
            return {TASK_ID: data.id, PROMISE_ID: data.action.data.id}
        case TaskFencesRequest() if len({action.data.id for action in data.actions}) == 1:
            # One promise's fences (a step created and settled): about it, as one fence is.
            return {TASK_ID: data.id, PROMISE_ID: data.actions[0].data.id}
        case (
            TaskGetRequest()
            | TaskAcquireRequest()
            | TaskReleaseRequest()
            | TaskFulfillRequest()
            | TaskFencesRequest()
            | TaskSuspendRequest()
            | TaskHaltRequest()
            | TaskContinueRequest()
        ):
            return {TASK_ID: data.id}
        case ScheduleGetRequest() | ScheduleCreateRequest() | ScheduleDeleteRequest():
            return {SCHEDULE_ID: data.id}
    return {}


def message_ids(message: Message) -> dict[str, str]:
    """The id an outbox message is about: an execute's task, an unblock's promise."""
    if isinstance(message, Execute):
        return {TASK_ID: message.data.task.id}
    return {PROMISE_ID: message.data.promise.id}
