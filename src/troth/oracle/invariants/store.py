"""The store's state properties across objects: every table's key is unique, and objects
of different kinds agree (a task and its promise, a callback and its awaiter, a listener's
or a message's address, a message and the task or promise it names).
"""

from __future__ import annotations

from collections.abc import Iterator

from troth.oracle.invariants.core import (
    PENDING,
    Finding,
    View,
    _duplicates,
    live,
    message_key,
    settled,
    state_property,
    targeted,
)
from troth.protocol import addresses
from troth.protocol.messages import ExecuteData, UnblockData
from troth.protocol.records import TARGET, TaskState

# -- keys ----------------------------------------------------------------------------------


@state_property
def well_formed_store_promise_ids_unique(v: View, now: int) -> Iterator[Finding]:
    yield from _duplicates(((p.id,) for p in v.snap.promises), "promise")


@state_property
def well_formed_store_task_ids_unique(v: View, now: int) -> Iterator[Finding]:
    yield from _duplicates(((t.id,) for t in v.snap.tasks), "task")


@state_property
def well_formed_store_schedule_ids_unique(v: View, now: int) -> Iterator[Finding]:
    yield from _duplicates(((s.id,) for s in v.snap.schedules), "schedule")


@state_property
def well_formed_store_outbox_keys_unique(v: View, now: int) -> Iterator[Finding]:
    yield from _duplicates((message_key(m) for m in v.snap.messages), "outbox")


# -- consistency across objects ------------------------------------------------------------


@state_property
def consistent_task_iff_targeted_promise(v: View, now: int) -> Iterator[Finding]:
    for t in v.tasks.values():
        p = v.promises.get(t.id)
        if p is None or not targeted(p):
            yield (t.id,), "task without a targeted promise" if p else "task without a promise"
    for p in v.promises.values():
        if targeted(p) and p.id not in v.tasks:
            yield (p.id,), "targeted promise without a task"


@state_property
def consistent_settled_promise_has_fulfilled_task(v: View, now: int) -> Iterator[Finding]:
    for p in v.promises.values():
        t = v.tasks.get(p.id)
        if settled(p) and t is not None and t.state != TaskState.FULFILLED:
            yield (p.id,), f"{p.state} promise with a {t.state} task"


@state_property
def consistent_callback_awaiter_is_targeted(v: View, now: int) -> Iterator[Finding]:
    for c in v.snap.callbacks:
        awaiter = v.promises.get(c.awaiter)
        if awaiter is None or not targeted(awaiter):
            why = "is untargeted" if awaiter else "does not exist"
            yield (c.awaited, c.awaiter), f"awaiter {c.awaiter} {why}"


@state_property
def consistent_listener_addresses_deliverable(v: View, now: int) -> Iterator[Finding]:
    for entry in v.snap.listeners:
        if not addresses.is_valid(entry.address):
            yield (entry.id,), f"listener address {entry.address!r} is not deliverable"


@state_property
def consistent_outbox_execute_names_existing_task(v: View, now: int) -> Iterator[Finding]:
    for m in v.snap.messages:
        data = m.message.data
        if isinstance(data, ExecuteData) and data.task.id not in v.tasks:
            yield (data.task.id,), "execute for a task that does not exist"


@state_property
def consistent_outbox_never_ahead(v: View, now: int) -> Iterator[Finding]:
    for m in v.snap.messages:
        data = m.message.data
        t = v.tasks.get(data.task.id) if isinstance(data, ExecuteData) else None
        if isinstance(data, ExecuteData) and t is not None and data.task.version > t.version:
            yield (t.id,), f"execute v{data.task.version} ahead of task v{t.version}"


@state_property
def consistent_outbox_execute_address_is_target_tag(v: View, now: int) -> Iterator[Finding]:
    for m in v.snap.messages:
        data = m.message.data
        p = v.promises.get(data.task.id) if isinstance(data, ExecuteData) else None
        if p is not None and m.address != p.tags.get(TARGET, ""):
            yield (p.id,), f"execute to {m.address!r}, target {p.tags.get(TARGET)!r}"


@state_property
def consistent_outbox_unblock_names_settled_promise(v: View, now: int) -> Iterator[Finding]:
    for m in v.snap.messages:
        data = m.message.data
        if not isinstance(data, UnblockData):
            continue
        stored = v.promises.get(data.promise.id)
        if not settled(data.promise) or stored is None or not settled(stored):
            yield (
                (data.promise.id,),
                f"unblock of a {data.promise.state} record, stored "
                + (f"{stored.state}" if stored else "absent"),
            )


@state_property
def consistent_outbox_unblock_address_deliverable(v: View, now: int) -> Iterator[Finding]:
    for m in v.snap.messages:
        data = m.message.data
        if isinstance(data, UnblockData) and not addresses.is_valid(m.address):
            yield (data.promise.id,), f"unblock to undeliverable address {m.address!r}"


@state_property
def consistent_settled_task_promise_settled(v: View, now: int) -> Iterator[Finding]:
    for t in v.tasks.values():
        p = v.promises.get(t.id)
        if t.state == TaskState.FULFILLED and p is not None and p.state == PENDING:
            yield (t.id,), "fulfilled task of a pending promise"


@state_property
def consistent_suspended_task_holds_rung(v: View, now: int) -> Iterator[Finding]:
    for t in v.tasks.values():
        p = v.promises.get(t.id)
        own_live = p is not None and live(p, now)
        if t.state == TaskState.SUSPENDED and own_live and not v.awaited_by.get(t.id):
            yield (t.id,), "suspended task of a live promise that no promise will resume"
