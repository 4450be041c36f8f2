"""The four transitions the environment fires, and ``catchUp``.

Lean's ``spec/02-actions/02-timeouts.lean`` (docs/references.md#the-abstract-machine).

None of them re-checks that its deadline is due (the environment is trusted to fire them
only then) and none checks the promise's liveness, as in Lean.
"""

from __future__ import annotations

from dataclasses import replace

import msgspec

from troth.oracle.promises import promise_create
from troth.oracle.resume import enqueue_resume
from troth.oracle.state import RETRY, ServerState, target_of
from troth.protocol.cron import expand, next_cron
from troth.protocol.messages import execute_message, unblock_message
from troth.protocol.records import PromiseState, Schedule, TaskState
from troth.protocol.requests import PromiseCreateRequest


def on_promise_timeout(s: ServerState, id: str, now: int) -> None:
    """Settle a pending promise at its deadline: timers resolve, the rest time out."""
    p = s.get_promise(id)
    if p is None:
        return
    if p.state != PromiseState.PENDING:
        return
    listeners = p.listeners
    callbacks = p.callbacks
    state = PromiseState.RESOLVED if p.is_timer else PromiseState.REJECTED_TIMEDOUT
    p = replace(p, state=state, settled_at=p.timeout_at, callbacks=(), listeners=())
    s.set_promise(p)
    s.del_promise_timeout(p.id)
    t = s.get_task(p.id)
    if t is not None:
        s.set_task(replace(t, state=TaskState.FULFILLED, pid=None, ttl=None, resumes=()))
        s.del_task_timeout(t.id)
    # settlement scrub: p can never be resumed again; drop its dead registrations
    s.promises = [
        replace(q, callbacks=tuple(c for c in q.callbacks if c != p.id))
        if q.state == PromiseState.PENDING
        else q
        for q in s.promises
    ]
    for address in listeners:
        s.set_message(address, unblock_message(p.to_record()))
    for awaiter_id in callbacks:
        enqueue_resume(s, p.id, awaiter_id, now)


def on_task_retry_timeout(s: ServerState, id: str, now: int) -> None:
    """Re-send a pending task's execute and re-arm the retry."""
    retry_timeout = s.config.retry_timeout
    t = s.get_task(id)
    if t is None:
        return
    if t.state != TaskState.PENDING:
        return
    s.del_task_timeout(t.id)
    s.set_task_timeout(t.id, RETRY, now + retry_timeout)
    p = s.get_promise(t.id)
    if p is None:
        return
    s.set_message(target_of(p), execute_message(t.id, t.version))


def on_task_lease_timeout(s: ServerState, id: str, now: int) -> None:
    """An expired lease returns the task to pending (version kept) and re-offers it."""
    retry_timeout = s.config.retry_timeout
    t = s.get_task(id)
    if t is None:
        return
    if t.state != TaskState.ACQUIRED:
        return
    t = replace(t, state=TaskState.PENDING, pid=None, ttl=None)
    s.set_task(t)
    s.del_task_timeout(t.id)
    s.set_task_timeout(t.id, RETRY, now + retry_timeout)
    p = s.get_promise(t.id)
    if p is None:
        return
    s.set_message(target_of(p), execute_message(t.id, t.version))


def catch_up(s: ServerState, now: int, sch: Schedule) -> Schedule:
    """Create every occurrence due by ``now``, each with ``promise.create`` at its own instant.

    Lean writes this as a (partial) recursion; a loop is the same thing and cannot exhaust
    Python's stack when many occurrences were missed.
    """
    while sch.next_run_at <= now:
        cron_time = sch.next_run_at
        promise_id = expand(sch.promise_id, sch.id, cron_time)
        promise_create(
            s,
            PromiseCreateRequest(
                id=promise_id,
                timeout_at=cron_time + sch.promise_timeout,
                param=sch.promise_param,
                tags=sch.promise_tags,
            ),
            cron_time,
        )
        sch = msgspec.structs.replace(
            sch, last_run_at=cron_time, next_run_at=next_cron(sch.cron, cron_time)
        )
    return sch


def on_schedule_timeout(s: ServerState, id: str, now: int) -> None:
    s0 = s.get_schedule(id)
    if s0 is None:
        return
    sch = catch_up(s, now, s0)
    s.set_schedule(sch)
    s.del_schedule_timeout(sch.id)
    s.set_schedule_timeout(sch.id, sch.next_run_at)
