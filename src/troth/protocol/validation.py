"""Checks a request must pass beyond its schema; each failure is a 400 naming the field.

These follow the reference server's rules (wire-protocol.md §4.3, §5, Appendix B) with
troth's decisions where they break the official SDKs:

- ids are ``<origin>:<lineage>`` as the current official SDKs mint them (see ``ids``):
  ``:`` is reserved in ``resonate:origin`` and schedule ids, ``.`` is allowed everywhere;
- ``task.heartbeat`` accepts an empty list (as the Lean spec does) and tasks of several
  origins (the Python SDK batches every task of a process into one heartbeat).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from troth.protocol import addresses, cron
from troth.protocol.ids import ORIGIN_SEP, child_id, descends, origin
from troth.protocol.records import BRANCH, DELAY, ORIGIN, PARENT, TARGET
from troth.protocol.requests import (
    PromiseCreateRequest,
    PromiseRegisterCallbackRequest,
    PromiseRegisterListenerRequest,
    ScheduleCreateRequest,
    TaskCreateRequest,
    TaskFenceRequest,
    TaskFulfillRequest,
    TaskSuspendRequest,
)

MAX_LIMIT = 1000


def promise_create(req: PromiseCreateRequest, where: str = "") -> list[str]:
    """The rules for every shape of promise creation (plain, in task.create, fenced)."""
    errors: list[str] = []
    tags = req.tags
    if "\x00" in req.id:
        errors.append(f"{where}id must not contain null bytes")
    if ORIGIN_SEP in tags.get(ORIGIN, ""):
        errors.append(f"{ORIGIN} must not contain '{ORIGIN_SEP}': it names a root id")
    for tag in (ORIGIN, BRANCH, PARENT):
        if tag in tags and not descends(req.id, tags[tag]):
            prefix = child_id(tags[tag], "")
            errors.append(f"{where}id must equal {tag} or start with {prefix!r}")
    if TARGET in tags and not addresses.is_valid(tags[TARGET]):
        errors.append(
            f"Invalid {TARGET} address {tags[TARGET]!r} in {where}tags: use poll://… or http(s)://…"
        )
    if DELAY in tags:
        delay = tags[DELAY]
        if not (delay.isascii() and delay.isdigit()) or int(delay) >= 2**63:
            errors.append(f"{DELAY} must be a non-negative integer (epoch ms)")
        elif int(delay) >= req.timeout_at:
            errors.append(f"{DELAY} must be less than timeoutAt")
        if TARGET not in tags:
            errors.append(f"{DELAY} requires a {TARGET} tag")
    return errors


def register_callback(req: PromiseRegisterCallbackRequest) -> list[str]:
    if req.awaited == req.awaiter:
        return ["awaited and awaiter must be different promises"]
    if origin(req.awaited) != origin(req.awaiter):
        return ["awaiter and awaited must belong to the same origin"]
    return []


def register_listener(req: PromiseRegisterListenerRequest) -> list[str]:
    if not addresses.is_valid(req.address):
        return [f"Invalid listener address {req.address!r}: use poll://… or http(s)://…"]
    return []


def task_create(req: TaskCreateRequest) -> list[str]:
    errors = promise_create(req.action.data, "action.data.")
    tags = req.action.data.tags
    if TARGET not in tags:
        errors.append(f"action.data.tags must have a {TARGET} tag")
    if DELAY in tags:
        errors.append(f"action.data.tags must not have a {DELAY} tag")
    return errors


def task_fulfill(req: TaskFulfillRequest) -> list[str]:
    if req.action.data.id != req.id:
        return ["action.data.id must match the task id"]
    return []


def task_suspend(req: TaskSuspendRequest) -> list[str]:
    if not req.actions:
        return ["actions must not be empty"]
    errors: list[str] = []
    for i, action in enumerate(req.actions):
        data = action.data
        if data.awaiter != req.id:
            errors.append(f"actions[{i}].data.awaiter must match the task id")
        elif data.awaited == req.id:
            errors.append(f"actions[{i}].data.awaited must not equal the task id")
        elif origin(data.awaited) != origin(req.id):
            errors.append(f"actions[{i}].data.awaited must belong to the task's origin")
    return errors


def task_fence(req: TaskFenceRequest) -> list[str]:
    data = req.action.data
    if data.id == req.id:
        return ["action.data.id must not equal the task id"]
    if isinstance(data, PromiseCreateRequest):
        return promise_create(data, "action.data.")
    return []


def schedule_create(req: ScheduleCreateRequest) -> list[str]:
    errors: list[str] = []
    if ORIGIN_SEP in req.id:
        errors.append("schedule id must not contain ':': it is the root of the promises it fires")
    if not cron.is_valid(req.cron):
        errors.append(
            f"Invalid cron expression {req.cron!r}: use 5 fields (or 6 with leading seconds)"
        )
    target = req.promise_tags.get(TARGET)
    if target is None:
        errors.append(f"promiseTags must include a {TARGET} tag")
    elif not addresses.is_valid(target):
        errors.append(f"Invalid {TARGET} address {target!r} in promiseTags")
    return errors


def search_limit(req: Any) -> list[str]:
    if req.limit is not None and not 1 <= req.limit <= MAX_LIMIT:
        return [f"limit must be between 1 and {MAX_LIMIT}"]
    return []


Validator = Callable[[Any], list[str]]
