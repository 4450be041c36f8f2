"""Rows to records and back: JSON text for payloads and tags, integers for instants."""

from __future__ import annotations

from typing import Any

import msgspec

from troth.engine.store import Task
from troth.protocol.messages import Message, decode_message
from troth.protocol.records import PromiseRecord, PromiseState, Schedule, TaskState, Value

_encode = msgspec.json.Encoder().encode
_value = msgspec.json.Decoder(Value)
_tags = msgspec.json.Decoder(dict[str, str])
_resumes = msgspec.json.Decoder(tuple[str, ...])


def text(obj: Any) -> str:
    return _encode(obj).decode()


PROMISE_COLUMNS = "id, state, param, value, tags, timeout_at, created_at, settled_at"


def promise_row(p: PromiseRecord) -> tuple[Any, ...]:
    return (
        p.id,
        p.state.value,
        text(p.param),
        text(p.value),
        text(p.tags),
        p.timeout_at,
        p.created_at,
        p.settled_at,
    )


def promise(row: tuple[Any, ...]) -> PromiseRecord:
    id, state, param, value, tags, timeout_at, created_at, settled_at = row
    return PromiseRecord(
        id=id,
        state=PromiseState(state),
        param=_value.decode(param),
        value=_value.decode(value),
        tags=_tags.decode(tags),
        timeout_at=timeout_at,
        created_at=created_at,
        settled_at=settled_at,
    )


TASK_COLUMNS = "id, state, version, ttl, pid, resumes"


def task_row(t: Task) -> tuple[Any, ...]:
    return (t.id, t.state.value, t.version, t.ttl, t.pid, text(t.resumes))


def task(row: tuple[Any, ...]) -> Task:
    id, state, version, ttl, pid, resumes = row
    return Task(id, TaskState(state), version, ttl, pid, _resumes.decode(resumes))


SCHEDULE_COLUMNS = (
    "id, cron, promise_id, promise_timeout, promise_param, promise_tags,"
    " created_at, next_run_at, last_run_at"
)


def schedule_row(s: Schedule) -> tuple[Any, ...]:
    return (
        s.id,
        s.cron,
        s.promise_id,
        s.promise_timeout,
        text(s.promise_param),
        text(s.promise_tags),
        s.created_at,
        s.next_run_at,
        s.last_run_at,
    )


def schedule(row: tuple[Any, ...]) -> Schedule:
    id, cron, promise_id, timeout, param, tags, created_at, next_run_at, last_run_at = row
    return Schedule(
        id=id,
        cron=cron,
        promise_id=promise_id,
        promise_timeout=timeout,
        promise_param=_value.decode(param),
        promise_tags=_tags.decode(tags),
        created_at=created_at,
        next_run_at=next_run_at,
        last_run_at=last_run_at,
    )


def message(raw: str) -> Message:
    return decode_message(raw)
