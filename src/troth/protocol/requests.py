"""The ``data`` of every request kind, as typed structs.

Each struct is decoded straight from the request's ``data`` object by msgspec, which rejects
missing fields, wrong JSON types, floats where integers belong and out-of-range numbers
with a message naming the field. Unknown keys are ignored, as the official SDKs send some.
The checks a schema cannot express (id prefixes, addresses, cron) live in ``validation``.
"""

from __future__ import annotations

from typing import Any, dataclass_transform

import msgspec

from troth.protocol.records import (
    EMPTY_VALUE,
    Duration,
    Millis,
    NonEmpty,
    NonNegative,
    PromiseState,
    SettleState,
    Tags,
    TaskRef,
    TaskState,
    Value,
)


# Subclasses inherit ``frozen`` from msgspec; see ``records.Record`` for why a type checker
# needs to be told.
@dataclass_transform(frozen_default=True, field_specifiers=(msgspec.field,))
class Data(msgspec.Struct, rename="camel", omit_defaults=True, frozen=True):
    """Base of every request body."""


# -- promises -------------------------------------------------------------------------------


class PromiseGetRequest(Data):
    id: NonEmpty


class PromiseCreateRequest(Data):
    id: NonEmpty
    timeout_at: NonNegative
    param: Value = EMPTY_VALUE
    tags: Tags = msgspec.field(default_factory=dict)


class PromiseSettleRequest(Data):
    id: NonEmpty
    state: SettleState
    value: Value = EMPTY_VALUE


class PromiseRegisterCallbackRequest(Data):
    awaited: NonEmpty
    awaiter: NonEmpty


class PromiseRegisterListenerRequest(Data):
    awaited: NonEmpty
    address: NonEmpty


class PromiseSearchRequest(Data):
    state: PromiseState | None = None
    tags: Tags | None = None
    limit: int | None = None
    cursor: str | None = None


# -- tasks ----------------------------------------------------------------------------------


class CreateAction(Data):
    """A nested ``promise.create`` envelope; its ``head`` must be present but is not read."""

    kind: str
    head: Any
    data: PromiseCreateRequest


class SettleAction(Data):
    kind: str
    head: Any
    data: PromiseSettleRequest


class CallbackAction(Data):
    kind: str
    head: Any
    data: PromiseRegisterCallbackRequest


class FenceAction(Data):
    """The operation a fence guards: ``promise.create`` or ``promise.settle``."""

    kind: str
    data: PromiseCreateRequest | PromiseSettleRequest
    head: Any = None


class TaskGetRequest(Data):
    id: NonEmpty


class TaskCreateRequest(Data):
    pid: NonEmpty
    ttl: Duration
    action: CreateAction


class TaskAcquireRequest(Data):
    id: NonEmpty
    version: NonNegative
    pid: NonEmpty
    ttl: Duration


class TaskReleaseRequest(Data):
    id: NonEmpty
    version: NonNegative


class TaskFulfillRequest(Data):
    id: NonEmpty
    version: NonNegative
    action: SettleAction


class TaskSuspendRequest(Data):
    id: NonEmpty
    version: NonNegative
    actions: list[CallbackAction]


class TaskFenceRequest(Data):
    id: NonEmpty
    version: NonNegative
    action: FenceAction


class TaskFencesRequest(Data):
    """troth's extension: ``task.fence {id, version, action}`` for each action, in order, as
    one request (docs/semantics.md, "Batched fences")."""

    id: NonEmpty
    version: NonNegative
    actions: list[FenceAction]


class TaskHeartbeatRequest(Data):
    pid: NonEmpty
    tasks: list[TaskRef]


class TaskHaltRequest(Data):
    id: NonEmpty


class TaskContinueRequest(Data):
    id: NonEmpty


class TaskSearchRequest(Data):
    state: TaskState | None = None
    limit: int | None = None
    cursor: str | None = None


# -- schedules ------------------------------------------------------------------------------


class ScheduleGetRequest(Data):
    id: NonEmpty


class ScheduleCreateRequest(Data):
    id: NonEmpty
    cron: NonEmpty
    promise_id: NonEmpty
    promise_timeout: Millis
    promise_param: Value = EMPTY_VALUE
    promise_tags: Tags = msgspec.field(default_factory=dict)


class ScheduleDeleteRequest(Data):
    id: NonEmpty


class ScheduleSearchRequest(Data):
    tags: Tags | None = None
    limit: int | None = None
    cursor: str | None = None


# -- debug ----------------------------------------------------------------------------------


class DebugRequest(Data):
    """``debug.start``, ``debug.stop``, ``debug.reset`` and ``debug.snap`` carry nothing."""


class DebugTickRequest(Data):
    time: Millis
