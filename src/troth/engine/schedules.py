"""The schedule handlers: S-01 get, S-02 create, S-03 delete (Lean ``spec/02-actions/S-*``,
docs/references.md#the-abstract-machine)."""

from __future__ import annotations

from troth.engine import queues
from troth.engine.store import Store
from troth.protocol.cron import next_cron
from troth.protocol.records import Schedule
from troth.protocol.requests import (
    ScheduleCreateRequest,
    ScheduleDeleteRequest,
    ScheduleGetRequest,
)
from troth.protocol.responses import EMPTY, Reply, ScheduleResponse


def schedule_get(store: Store, req: ScheduleGetRequest, now: int) -> Reply:
    schedule = store.get_schedule(req.id)
    if schedule is None:
        return Reply(404)
    return Reply(200, ScheduleResponse(schedule))


def schedule_create(store: Store, req: ScheduleCreateRequest, now: int) -> Reply:
    """Create if absent and arm the first fire; nothing fires at creation."""
    existing = store.get_schedule(req.id)
    if existing is not None:
        return Reply(200, ScheduleResponse(existing))
    if (refused := queues.undeclared(store, req.promise_tags)) is not None:
        return Reply(400, refused.replace("tags.", "promiseTags.", 1))
    schedule = Schedule(
        id=req.id,
        cron=req.cron,
        promise_id=req.promise_id,
        promise_timeout=req.promise_timeout,
        promise_param=req.promise_param,
        promise_tags=req.promise_tags,
        created_at=now,
        next_run_at=next_cron(req.cron, now),
    )
    store.set_schedule(schedule)
    store.set_schedule_timeout(schedule.id, schedule.next_run_at)
    return Reply(200, ScheduleResponse(schedule))


def schedule_delete(store: Store, req: ScheduleDeleteRequest, now: int) -> Reply:
    """Delete the schedule and its timeout; the promises it created stay."""
    if store.get_schedule(req.id) is None:
        return Reply(404)
    store.del_schedule(req.id)
    store.del_schedule_timeout(req.id)
    return Reply(200, EMPTY)
