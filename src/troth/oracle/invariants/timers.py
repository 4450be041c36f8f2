"""The state properties of 83d64c3's timer tables (``promiseTimeouts``, ``taskTimeouts``,
``scheduleTimeouts``), which HEAD's catalogue has no image of: the prose invariants under
their own names, and troth's like ones for the other tables (the package docstring says
which). The task rows' coupling to the task's state is in ``tasks``.
"""

from __future__ import annotations

from collections.abc import Iterator

from troth.oracle.invariants.core import (
    LEASE,
    PENDING,
    RETRY,
    Finding,
    View,
    external,
    settled,
    state_property,
)


@state_property
def missing_ptimeout(v: View, now: int) -> Iterator[Finding]:
    for p in v.promises.values():
        armed = v.promise_timeouts.get(p.id)
        if p.state == PENDING and external(p) and armed != p.timeout_at:
            yield (p.id,), f"pending external promise armed at {armed}, deadline {p.timeout_at}"


@state_property
def arming_is_external_only(v: View, now: int) -> Iterator[Finding]:
    for id in v.promise_timeouts:
        p = v.promises.get(id)
        if p is not None and not external(p):
            yield (id,), "promise timeout armed for an internal promise"


@state_property
def stale_ptimeout(v: View, now: int) -> Iterator[Finding]:
    for id in v.promise_timeouts:
        p = v.promises.get(id)
        if p is None or settled(p):
            yield (id,), f"promise timeout for a {p.state if p else 'missing'} promise"


@state_property
def stale_ttimeout(v: View, now: int) -> Iterator[Finding]:
    for row in v.snap.task_timeouts:
        if row.id not in v.tasks or row.type not in (RETRY, LEASE):
            yield (row.id,), f"task timeout of type {row.type} for an unknown task or kind"


@state_property
def schedule_timeout_matches_next_run_at(v: View, now: int) -> Iterator[Finding]:
    for s in v.schedules.values():
        if v.schedule_timeouts.get(s.id) != s.next_run_at:
            armed = v.schedule_timeouts.get(s.id)
            yield (s.id,), f"schedule timeout {armed}, nextRunAt {s.next_run_at}"
    for id in v.schedule_timeouts.keys() - v.schedules.keys():
        yield (id,), "schedule timeout for a schedule that does not exist"


@state_property
def listener_for_settled_promise(v: View, now: int) -> Iterator[Finding]:
    for id, held in v.listeners.items():
        p = v.promises.get(id)
        if p is None or settled(p):
            yield (id,), f"{len(held)} listeners on a {p.state if p else 'missing'} promise"


@state_property
def callback_for_settled_promise(v: View, now: int) -> Iterator[Finding]:
    for id, held in v.callbacks.items():
        p = v.promises.get(id)
        if p is None or settled(p):
            yield (id,), f"callbacks {sorted(held)} on a {p.state if p else 'missing'} promise"
