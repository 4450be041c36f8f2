"""The schedule properties: the order of a schedule's instants in every state, and the
fields no step may change. A schedule's timeout row is judged in ``timers``.
"""

from __future__ import annotations

from collections.abc import Iterator

from troth.oracle.invariants.core import Finding, Step, View, state_property, step_property


@state_property
def well_formed_schedule_created_at_lte_next_run_at(v: View, now: int) -> Iterator[Finding]:
    for s in v.schedules.values():
        if s.created_at > s.next_run_at:
            yield (s.id,), f"createdAt {s.created_at} > nextRunAt {s.next_run_at}"


@state_property
def well_formed_schedule_created_at_lte_last_run_at(v: View, now: int) -> Iterator[Finding]:
    for s in v.schedules.values():
        if s.last_run_at is not None and s.created_at > s.last_run_at:
            yield (s.id,), f"createdAt {s.created_at} > lastRunAt {s.last_run_at}"


@state_property
def well_formed_schedule_last_run_at_lt_next_run_at(v: View, now: int) -> Iterator[Finding]:
    for s in v.schedules.values():
        if s.last_run_at is not None and s.last_run_at >= s.next_run_at:
            yield (s.id,), f"lastRunAt {s.last_run_at} >= nextRunAt {s.next_run_at}"


@step_property
def preserved_schedule_birth_fields_immutable(s: Step) -> Iterator[Finding]:
    fields = ("cron", "promise_id", "promise_timeout", "promise_param", "promise_tags")
    for id, a in s.after.schedules.items():
        b = s.before.schedules.get(id)
        if b is None:
            continue
        for field in (*fields, "created_at"):
            if getattr(b, field) != getattr(a, field):
                yield (id,), f"{field} changed from {getattr(b, field)} to {getattr(a, field)}"
