"""The schedule handlers S-01..S-03, one function each.

Lean's ``spec/02-actions/S-0*.lean`` (docs/references.md#the-abstract-machine).
"""

from __future__ import annotations

from troth.oracle.state import ServerState
from troth.protocol.cron import next_cron
from troth.protocol.records import Schedule
from troth.protocol.requests import (
    ScheduleCreateRequest,
    ScheduleDeleteRequest,
    ScheduleGetRequest,
)
from troth.protocol.responses import EMPTY, Reply, ScheduleResponse


def schedule_get(s: ServerState, req: ScheduleGetRequest, now: int) -> Reply:
    """S-01."""
    sch = s.get_schedule(req.id)
    if sch is None:
        return Reply(404)
    return Reply(200, ScheduleResponse(sch))


def schedule_create(s: ServerState, req: ScheduleCreateRequest, now: int) -> Reply:
    """S-02. An existing schedule wins unchanged; a new one fires first at ``nextCron``."""
    existing = s.get_schedule(req.id)
    if existing is not None:
        return Reply(200, ScheduleResponse(existing))
    sch = Schedule(
        id=req.id,
        cron=req.cron,
        promise_id=req.promise_id,
        promise_timeout=req.promise_timeout,
        promise_param=req.promise_param,
        promise_tags=req.promise_tags,
        created_at=now,
        next_run_at=next_cron(req.cron, now),
        last_run_at=None,
    )
    s.set_schedule(sch)
    s.set_schedule_timeout(sch.id, sch.next_run_at)
    return Reply(200, ScheduleResponse(sch))


def schedule_delete(s: ServerState, req: ScheduleDeleteRequest, now: int) -> Reply:
    """S-03. Promises the schedule already created stay."""
    sch = s.get_schedule(req.id)
    if sch is None:
        return Reply(404)
    s.del_schedule(sch.id)
    s.del_schedule_timeout(sch.id)
    return Reply(200, EMPTY)
