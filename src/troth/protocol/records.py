"""Wire records: what promises, tasks and schedules look like in JSON.

Field names follow the Resonate protocol (`2026-04-01`) exactly. Optional fields default to
``None`` and every struct omits defaults when encoded, because the official TypeScript SDK
rejects a whole response when a field such as ``settledAt`` or ``pid`` is ``null``.
Fields that are always present on the wire (``param``, ``value``, ``tags``) have no default,
so they are never omitted.
"""

from __future__ import annotations

import enum
from typing import Annotated, dataclass_transform

import msgspec

# JSON integers on the wire are signed 64-bit; anything larger is a client mistake.
NonNegative = Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]
# Durations and clock readings stay within 2**53 (JavaScript's safe integers), so that sums
# such as `now + ttl` can never leave the 64-bit range a database column holds.
MAX_MILLIS = 2**53 - 1
Millis = Annotated[int, msgspec.Meta(ge=0, le=MAX_MILLIS)]
Duration = Annotated[int, msgspec.Meta(ge=1, le=MAX_MILLIS)]
NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]
Tags = dict[str, str]


class PromiseState(enum.StrEnum):
    PENDING = "pending"
    RESOLVED = "resolved"
    REJECTED = "rejected"
    REJECTED_CANCELED = "rejected_canceled"
    REJECTED_TIMEDOUT = "rejected_timedout"


class SettleState(enum.StrEnum):
    """The states a client may settle to; ``rejected_timedout`` belongs to the server."""

    RESOLVED = "resolved"
    REJECTED = "rejected"
    REJECTED_CANCELED = "rejected_canceled"


class TaskState(enum.StrEnum):
    PENDING = "pending"
    ACQUIRED = "acquired"
    SUSPENDED = "suspended"
    HALTED = "halted"
    FULFILLED = "fulfilled"


# msgspec passes a struct's options (``frozen`` here) on to its subclasses, but a type checker
# reads ``frozen`` from each class statement and would call every subclass non-frozen (and an
# error). Declaring the base a dataclass transform with ``frozen_default=True`` tells it what
# msgspec does at run time; the decorator only sets a marker attribute on the class.
@dataclass_transform(frozen_default=True, field_specifiers=(msgspec.field,))
class Record(msgspec.Struct, rename="camel", omit_defaults=True, frozen=True):
    """Base of every wire struct: camelCase names, absent optionals omitted."""


class Value(Record):
    """An opaque payload. Presence of each key is preserved: absent stays absent."""

    headers: Tags | None = None
    data: str | None = None


EMPTY_VALUE = Value()


class PromiseRecord(Record):
    id: str
    state: PromiseState
    param: Value
    value: Value
    tags: Tags
    timeout_at: int
    created_at: int
    settled_at: int | None = None


class TaskRecord(Record):
    id: str
    state: TaskState
    version: int
    resumes: int
    ttl: int | None = None
    pid: str | None = None


class TaskRef(Record):
    """A task at a version: the task an ``execute`` message names, one ``task.heartbeat``
    extends (Lean's ``ref``)."""

    id: str
    version: NonNegative


class Schedule(Record):
    id: str
    cron: str
    promise_id: str
    promise_timeout: int
    promise_param: Value
    promise_tags: Tags
    created_at: int
    next_run_at: int
    last_run_at: int | None = None


# Reserved tags (docs/references.md#reserved-tags).
TARGET = "resonate:target"
TIMER = "resonate:timer"
DELAY = "resonate:delay"
ORIGIN = "resonate:origin"
BRANCH = "resonate:branch"
PARENT = "resonate:parent"
PREFIX = "resonate:prefix"


def is_timer(tags: Tags) -> bool:
    return tags.get(TIMER) == "true"


def timed_out_state(tags: Tags) -> PromiseState:
    """The verdict a deadline gives: timers resolve, everything else times out."""
    return PromiseState.RESOLVED if is_timer(tags) else PromiseState.REJECTED_TIMEDOUT
