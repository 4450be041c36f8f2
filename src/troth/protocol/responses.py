"""The ``data`` of every successful response, and the debug snapshot."""

from __future__ import annotations

from typing import Any, NamedTuple

import msgspec

from troth.protocol.messages import ExecuteData, Message
from troth.protocol.records import PromiseRecord, Record, Schedule, TaskRecord


class Reply(NamedTuple):
    """What a handler, or the server around it, answers: a status and a body.

    For 200 and 300 the body is the kind's typed response (``Kind.responses``). For an error
    status it is the message: a handler leaves it None and the envelope supplies the kind's
    wording (``Kind.message``); the server's own refusals (400, 403, 413, 5xx) and a
    client's decoded answer carry the text itself.
    """

    status: int
    body: Any = None


class Empty(Record):
    pass


EMPTY = Empty()


class PromiseResponse(Record):
    """promise.get, promise.create, promise.settle, register_callback/listener, task.fulfill."""

    promise: PromiseRecord


class PromiseSearchResponse(Record):
    promises: list[PromiseRecord]
    cursor: str | None = None


class TaskGetResponse(Record):
    task: TaskRecord


class TaskClaimResponse(Record):
    """task.create and task.acquire: the task, its promise and the branch's settled promises."""

    promise: PromiseRecord
    preload: list[PromiseRecord]
    task: TaskRecord | None = None


class TaskSuspendedResponse(Record):
    """The 300 of task.suspend: something awaited is already settled."""

    preload: list[PromiseRecord]


class TaskFenceResult(NamedTuple):
    """A fence's body: the nested action's kind and reply, and the task's branch preload
    computed after it. On the wire the action is a whole response envelope, which needs the
    outer corrId, so the envelope writes it (and reads it back, from ``TaskFenceResponse``)."""

    kind: str
    inner: Reply
    preload: list[PromiseRecord]


class TaskFenceResponse(Record):
    """A fence's body as JSON: ``action`` is the nested response envelope, still raw."""

    action: msgspec.Raw
    preload: list[PromiseRecord]


class TaskFencesResult(NamedTuple):
    """A ``task.fences`` body: the reply of each fence, in order, as ``task.fence`` answers
    it (a 200 with a ``TaskFenceResult`` whose preload is empty, or an error status with its
    message). On the wire each is a whole ``task.fence`` response envelope."""

    fences: list[Reply]


class TaskFencesResponse(Record):
    """A ``task.fences`` body as JSON: each fence's response envelope, still raw."""

    fences: list[msgspec.Raw]


class TaskSearchResponse(Record):
    tasks: list[TaskRecord]
    cursor: str | None = None


class ScheduleResponse(Record):
    schedule: Schedule


class ScheduleSearchResponse(Record):
    schedules: list[Schedule]
    cursor: str | None = None


# -- debug.snap (docs/references.md#debug-kinds-and-the-snapshot) -------------------------


class PromiseTimeoutEntry(Record):
    id: str
    timeout: int


class TaskTimeoutEntry(msgspec.Struct, frozen=True):
    id: str
    type: int  # 0 = retry of a pending task, 1 = lease of an acquired task
    timeout: int


class ScheduleTimeoutEntry(Record):
    id: str
    timeout: int


class CallbackEntry(Record):
    awaiter: str
    awaited: str


class ListenerEntry(Record):
    id: str
    address: str


class OutboxEntry(Record):
    address: str
    message: Message


class Snapshot(Record):
    """The whole machine state, each list sorted as the reference server sorts it.

    ``schedules`` and ``scheduleTimeouts`` are troth's additions: without them a snapshot
    cannot show that two implementations agree on schedules.
    """

    promises: list[PromiseRecord]
    promise_timeouts: list[PromiseTimeoutEntry]
    callbacks: list[CallbackEntry]
    listeners: list[ListenerEntry]
    tasks: list[TaskRecord]
    task_timeouts: list[TaskTimeoutEntry]
    messages: list[OutboxEntry]
    schedules: list[Schedule]
    schedule_timeouts: list[ScheduleTimeoutEntry]


def _message_order(entry: OutboxEntry) -> tuple[int, str, str]:
    data = entry.message.data
    if isinstance(data, ExecuteData):
        return (0, data.task.id, "")
    return (1, data.promise.id, entry.address)


def make_snapshot(
    promises: list[PromiseRecord],
    promise_timeouts: list[PromiseTimeoutEntry],
    callbacks: list[CallbackEntry],
    listeners: list[ListenerEntry],
    tasks: list[TaskRecord],
    task_timeouts: list[TaskTimeoutEntry],
    messages: list[OutboxEntry],
    schedules: list[Schedule],
    schedule_timeouts: list[ScheduleTimeoutEntry],
) -> Snapshot:
    """A snapshot with every list in the canonical order, whatever order the store used."""
    return Snapshot(
        promises=sorted(promises, key=lambda p: p.id),
        promise_timeouts=sorted(promise_timeouts, key=lambda t: t.id),
        callbacks=sorted(callbacks, key=lambda c: (c.awaiter, c.awaited)),
        listeners=sorted(listeners, key=lambda entry: (entry.id, entry.address)),
        tasks=sorted(tasks, key=lambda t: t.id),
        task_timeouts=sorted(task_timeouts, key=lambda t: (t.id, t.type)),
        messages=sorted(messages, key=_message_order),
        schedules=sorted(schedules, key=lambda s: s.id),
        schedule_timeouts=sorted(schedule_timeouts, key=lambda t: t.id),
    )
