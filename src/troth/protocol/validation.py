"""Checks a request must pass beyond its schema; each failure is a 400 naming the field.

These follow the reference server's rules (docs/references.md#ids-and-origins, #request-kinds and
#validation-messages) with troth's decisions where they break the official SDKs:

- ids are ``<origin>:<lineage>`` as the current official SDKs mint them (see ``ids``):
  ``:`` is reserved in ``resonate:origin`` and schedule ids, ``.`` is allowed everywhere;
- ``task.heartbeat`` accepts an empty list (as the Lean spec does) and tasks of several
  origins (the Python SDK batches every task of a process into one heartbeat);
- every id, address and set of tags is held to the sizes and characters of ``limits``, in
  every kind, so that both backends store (or refuse) exactly the same input.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from troth.protocol import addresses, cron, queues
from troth.protocol.ids import ORIGIN_SEP, child_id, descends, origin
from troth.protocol.limits import (
    MAX_FENCES,
    MAX_FILTERS,
    MAX_ID_BYTES,
    address_errors,
    byte_size,
    id_errors,
    tags_errors,
)
from troth.protocol.records import BRANCH, DELAY, MAX_MILLIS, ORIGIN, PARENT, TARGET
from troth.protocol.requests import (
    PromiseCreateRequest,
    PromiseRegisterCallbackRequest,
    PromiseRegisterListenerRequest,
    PromiseSettleRequest,
    ScheduleCreateRequest,
    TaskAcquireRequest,
    TaskCreateRequest,
    TaskFenceRequest,
    TaskFencesRequest,
    TaskFulfillRequest,
    TaskHeartbeatRequest,
    TaskSuspendRequest,
)

MAX_LIMIT = 1000


def promise_create(req: PromiseCreateRequest, where: str = "") -> list[str]:
    """The rules for every shape of promise creation (plain, in task.create, fenced)."""
    tags = req.tags
    errors = id_errors(f"{where}id", req.id) + tags_errors(f"{where}tags", tags)
    if ORIGIN_SEP in tags.get(ORIGIN, ""):
        errors.append(f"{ORIGIN} must not contain '{ORIGIN_SEP}': it names a root id")
    for tag in (ORIGIN, BRANCH, PARENT):
        if tag in tags and not descends(req.id, tags[tag]):
            prefix = child_id(tags[tag], "")
            errors.append(f"{where}id must equal {tag} or start with {prefix!r}")
    if TARGET in tags:
        errors += _address(f"{TARGET} address", tags[TARGET], f" in {where}tags")
    if DELAY in tags:
        delay = tags[DELAY]
        if not (delay.isascii() and delay.isdigit()) or int(delay) >= 2**63:
            errors.append(f"{DELAY} must be a non-negative integer (epoch ms)")
        elif int(delay) >= req.timeout_at:
            errors.append(f"{DELAY} must be less than timeoutAt")
        if TARGET not in tags:
            errors.append(f"{DELAY} requires a {TARGET} tag")
    return errors + queues.tag_errors(f"{where}tags", tags)


def _address(label: str, address: str, place: str = "") -> list[str]:
    if not addresses.is_valid(address):
        return [f"Invalid {label} {address!r}{place}: use poll://… or http(s)://…"]
    return address_errors(f"{label}{place}", address)


def lookup(req: Any) -> list[str]:
    """The kinds that name one object by ``id``."""
    return id_errors("id", req.id)


def register_callback(req: PromiseRegisterCallbackRequest) -> list[str]:
    if errors := id_errors("awaited", req.awaited) + id_errors("awaiter", req.awaiter):
        return errors
    if req.awaited == req.awaiter:
        return ["awaited and awaiter must be different promises"]
    if origin(req.awaited) != origin(req.awaiter):
        return ["awaiter and awaited must belong to the same origin"]
    return []


def register_listener(req: PromiseRegisterListenerRequest) -> list[str]:
    return id_errors("awaited", req.awaited) + _address("listener address", req.address)


def task_create(req: TaskCreateRequest) -> list[str]:
    errors = id_errors("pid", req.pid) + promise_create(req.action.data, "action.data.")
    tags = req.action.data.tags
    if TARGET not in tags:
        errors.append(f"action.data.tags must have a {TARGET} tag")
    if DELAY in tags:
        errors.append(f"action.data.tags must not have a {DELAY} tag")
    return errors


def task_acquire(req: TaskAcquireRequest) -> list[str]:
    return id_errors("id", req.id) + id_errors("pid", req.pid)


def task_fulfill(req: TaskFulfillRequest) -> list[str]:
    if errors := id_errors("id", req.id):
        return errors
    if req.action.data.id != req.id:
        return ["action.data.id must match the task id"]
    return []


def task_suspend(req: TaskSuspendRequest) -> list[str]:
    if not req.actions:
        return ["actions must not be empty"]
    errors = id_errors("id", req.id)
    for i, action in enumerate(req.actions):
        data = action.data
        if found := id_errors(f"actions[{i}].data.awaited", data.awaited):
            errors += found
        elif data.awaiter != req.id:
            errors.append(f"actions[{i}].data.awaiter must match the task id")
        elif data.awaited == req.id:
            errors.append(f"actions[{i}].data.awaited must not equal the task id")
        elif origin(data.awaited) != origin(req.id):
            errors.append(f"actions[{i}].data.awaited must belong to the task's origin")
    return errors


def task_fence(req: TaskFenceRequest) -> list[str]:
    return id_errors("id", req.id) or _fenced(req.id, req.action.data, "action.data.")


def task_fences(req: TaskFencesRequest) -> list[str]:
    """Every fence of the batch judged as ``task.fence`` judges its own, each error naming
    its action; one error refuses the whole batch."""
    if not req.actions:
        return ["actions must not be empty"]
    if len(req.actions) > MAX_FENCES:
        return [f"actions has {len(req.actions)} entries: the limit is {MAX_FENCES}"]
    if errors := id_errors("id", req.id):
        return errors
    return [
        error
        for i, action in enumerate(req.actions)
        for error in _fenced(req.id, action.data, f"actions[{i}].data.")
    ]


def _fenced(
    task_id: str, data: PromiseCreateRequest | PromiseSettleRequest, where: str
) -> list[str]:
    """The checks of one fenced action: not the task's own promise, then its kind's."""
    if data.id == task_id:
        return [f"{where}id must not equal the task id"]
    if isinstance(data, PromiseCreateRequest):
        return promise_create(data, where)
    return id_errors(f"{where}id", data.id)


def task_heartbeat(req: TaskHeartbeatRequest) -> list[str]:
    errors = id_errors("pid", req.pid)
    for i, task in enumerate(req.tasks):
        errors += id_errors(f"tasks[{i}].id", task.id)
    return errors


def schedule_create(req: ScheduleCreateRequest) -> list[str]:
    tags = req.promise_tags
    # The fired ids contain the schedule's id: judged only once it passes on its own.
    errors = id_errors("id", req.id) or _fired_id_errors(req)
    fired_ok = not errors  # the fired ids are only expanded again once they are bounded
    errors += tags_errors("promiseTags", tags)
    # The schedule's tags go on every promise it fires, unchecked by promise.create there,
    # so the ids among them are checked here, as promise.create would check them.
    for tag in (ORIGIN, BRANCH, PARENT):
        if tag in tags:
            found = id_errors(f"{tag} in promiseTags", tags[tag])
            errors += found or (_lineage_errors(req, tag) if fired_ok else [])
    if ORIGIN_SEP in tags.get(ORIGIN, ""):
        errors.append(f"{ORIGIN} in promiseTags must not contain '{ORIGIN_SEP}': it names a root")
    if ORIGIN_SEP in req.id:
        errors.append("schedule id must not contain ':': it is the root of the promises it fires")
    if not cron.is_valid(req.cron):
        errors.append(
            f"Invalid cron expression {req.cron!r}: use 5 fields (or 6 with leading seconds)"
        )
    target = tags.get(TARGET)
    if target is None:
        errors.append(f"promiseTags must include a {TARGET} tag")
    else:
        errors += _address(f"{TARGET} address", target, " in promiseTags")
    return errors + queues.tag_errors("promiseTags", tags)


def _lineage_errors(req: ScheduleCreateRequest, tag: str) -> list[str]:
    """A lineage tag of ``promiseTags`` held to ``promise_create``'s rule for every promise
    the schedule will fire: the fired id must equal it or start with it and ``:``.

    Without this a schedule could fire promises on another root's branch (and a scoped
    token's task would be preloaded with that root's values). The fired ids share exactly
    the literal text before the first ``{{.timestamp}}``, so expanding at the earliest and the
    latest timestamp (whose first digits differ) and checking both decides it for all."""
    ancestor = req.promise_tags[tag]
    for timestamp in (0, MAX_MILLIS):
        fired = cron.expand(req.promise_id, req.id, timestamp)
        if not descends(fired, ancestor):
            prefix = child_id(ancestor, "")
            field = "promiseId (expanded)"
            return [f"{field} must equal {tag} in promiseTags or start with {prefix!r}"]
    return []


def _fired_id_errors(req: ScheduleCreateRequest) -> list[str]:
    """The limits of the ids a schedule fires: ``promiseId`` expanded, with the timestamp
    at its widest. Measured before it is built when it would be long: a template of many
    ``{{.id}}`` would otherwise expand into megabytes here."""
    field = "promiseId (expanded)"
    uses = req.promise_id.count(cron.ID_FIELD)
    least = byte_size(req.promise_id) + uses * (byte_size(req.id) - len(cron.ID_FIELD))
    if least > MAX_ID_BYTES:
        return [f"{field} is at least {least} bytes long: the limit is {MAX_ID_BYTES} bytes"]
    return id_errors(field, cron.expand(req.promise_id, req.id, MAX_MILLIS))


def search_limit(req: Any) -> list[str]:
    if req.limit is not None and not 1 <= req.limit <= MAX_LIMIT:
        return [f"limit must be between 1 and {MAX_LIMIT}"]
    return []


def search(req: Any) -> list[str]:
    """A search's limit, its cursor (an id) and its tag filters, if it takes them."""
    errors = search_limit(req)
    if req.cursor is not None:
        errors += id_errors("cursor", req.cursor)
    if getattr(req, "tags", None) is not None:
        errors += tags_errors("tags", req.tags, MAX_FILTERS)
    return errors


Validator = Callable[[Any], list[str]]
