"""``debug.tick``: fire every due timeout, as docs/semantics.md specifies.

Earliest deadline first; ties go promise timeouts, then task retries, then task leases,
then schedules, then by id. Each transition runs with ``now = time``, and the loop goes on
until nothing is due, so a deadline armed by a fired transition (a schedule occurrence's
retry or promise timeout) fires in the same tick. Lean's transitions do not always remove
the entry that fired them (a retry of a task that is no longer pending, say); such an entry,
still in place and unchanged, is a stale obligation and is dropped, so a tick always ends.
"""

from __future__ import annotations

from troth.oracle.state import (
    RETRY,
    PromiseTimeout,
    ScheduleTimeout,
    ServerState,
    TaskTimeout,
)
from troth.oracle.timeouts import (
    on_promise_timeout,
    on_schedule_timeout,
    on_task_lease_timeout,
    on_task_retry_timeout,
)

Due = PromiseTimeout | TaskTimeout | ScheduleTimeout


def _order(entry: Due) -> tuple[int, int, str]:
    if isinstance(entry, PromiseTimeout):
        rank = 0
    elif isinstance(entry, TaskTimeout):
        rank = 1 if entry.kind == RETRY else 2
    else:
        rank = 3
    return (entry.timeout, rank, entry.id)


def _earliest_due(s: ServerState, time: int) -> Due | None:
    entries: list[Due] = [*s.promise_timeouts, *s.task_timeouts, *s.schedule_timeouts]
    due = [e for e in entries if e.timeout <= time]
    return min(due, key=_order, default=None)


def _fire(s: ServerState, entry: Due, time: int) -> None:
    if isinstance(entry, PromiseTimeout):
        on_promise_timeout(s, entry.id, time)
    elif isinstance(entry, TaskTimeout):
        if entry.kind == RETRY:
            on_task_retry_timeout(s, entry.id, time)
        else:
            on_task_lease_timeout(s, entry.id, time)
    else:
        on_schedule_timeout(s, entry.id, time)


def _drop(s: ServerState, entry: Due) -> None:
    if isinstance(entry, PromiseTimeout):
        s.promise_timeouts = [t for t in s.promise_timeouts if t != entry]
    elif isinstance(entry, TaskTimeout):
        s.task_timeouts = [t for t in s.task_timeouts if t != entry]
    else:
        s.schedule_timeouts = [t for t in s.schedule_timeouts if t != entry]


def tick(s: ServerState, time: int) -> None:
    while (entry := _earliest_due(s, time)) is not None:
        _fire(s, entry, time)
        _drop(s, entry)  # a no-op unless the transition left it in place unchanged
