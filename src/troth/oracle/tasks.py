"""The task handlers T-01..T-10, one function each.

Lean's ``spec/02-actions/T-*.lean`` (docs/references.md#the-abstract-machine).

Acquire, fence, suspend, fulfill and release open with the same guard, checked in Lean's
order: task missing 404; its promise missing 409; wrong task state 409; promise not pending
or past its deadline 409; version mismatch 409. ``_guard`` is that sequence.

Bodies carry ``preload=[]`` as Lean's do; the oracle's extension layer fills preload in.
"""

from __future__ import annotations

from dataclasses import replace

from troth.oracle.promises import promise_create, promise_settle
from troth.oracle.resume import enqueue_resume
from troth.oracle.state import (
    LEASE,
    RETRY,
    PromiseObject,
    ServerState,
    TaskObject,
    target_of,
)
from troth.protocol.messages import execute_message, unblock_message
from troth.protocol.records import TARGET, PromiseState, TaskState, is_timer
from troth.protocol.requests import (
    PromiseCreateRequest,
    TaskAcquireRequest,
    TaskContinueRequest,
    TaskCreateRequest,
    TaskFenceRequest,
    TaskFulfillRequest,
    TaskGetRequest,
    TaskHaltRequest,
    TaskHeartbeatRequest,
    TaskReleaseRequest,
    TaskSuspendRequest,
)
from troth.protocol.responses import (
    EMPTY,
    PromiseResponse,
    Reply,
    TaskClaimResponse,
    TaskFenceResult,
    TaskGetResponse,
    TaskSuspendedResponse,
)


def _claimed(t: TaskObject, p: PromiseObject) -> Reply:
    return Reply(200, TaskClaimResponse(promise=p.to_record(), preload=[], task=t.to_record()))


def _guard(
    s: ServerState, id: str, version: int, required: TaskState, now: int
) -> tuple[TaskObject, PromiseObject] | Reply:
    t = s.get_task(id)
    if t is None:
        return Reply(404)
    p = s.get_promise(t.id)
    if p is None:
        return Reply(409)
    if t.state != required:
        return Reply(409)
    if p.state != PromiseState.PENDING or p.timeout_at <= now:
        return Reply(409)
    if t.version != version:
        return Reply(409)
    return t, p


def task_get(s: ServerState, req: TaskGetRequest, now: int) -> Reply:
    """T-01. A task whose promise is settled or dead is shown fulfilled, without a write."""
    t = s.get_task(req.id)
    if t is None:
        return Reply(404)
    p = s.get_promise(t.id)
    if p is None:
        return Reply(404)
    if p.state == PromiseState.PENDING and p.timeout_at > now:
        return Reply(200, TaskGetResponse(t.to_record()))
    shown = replace(t, state=TaskState.FULFILLED, pid=None, ttl=None, resumes=())
    return Reply(200, TaskGetResponse(shown.to_record()))


def task_create(s: ServerState, req: TaskCreateRequest, now: int) -> Reply:
    """T-02. A fresh task is born acquired (no execute); an existing pending one is acquired."""
    a = req.action.data
    t: TaskObject | None  # born here, or looked up below
    p = s.get_promise(a.id)
    if p is None:
        if a.timeout_at > now:
            p = PromiseObject(
                id=a.id,
                state=PromiseState.PENDING,
                param=a.param,
                tags=a.tags,
                timeout_at=a.timeout_at,
                created_at=now,
            )
            s.set_promise(p)
            s.set_promise_timeout(p.id, p.timeout_at)
            t = TaskObject(id=p.id, state=TaskState.ACQUIRED, version=1, ttl=req.ttl, pid=req.pid)
            s.set_task(t)
            s.set_task_timeout(t.id, LEASE, now + req.ttl)
            return _claimed(t, p)
        st = PromiseState.RESOLVED if is_timer(a.tags) else PromiseState.REJECTED_TIMEDOUT
        p = PromiseObject(
            id=a.id,
            state=st,
            param=a.param,
            tags=a.tags,
            timeout_at=a.timeout_at,
            created_at=a.timeout_at,
            settled_at=a.timeout_at,
        )
        s.set_promise(p)
        t = TaskObject(id=p.id, state=TaskState.FULFILLED, version=0)
        s.set_task(t)
        return _claimed(t, p)
    if TARGET not in p.tags:
        return Reply(422)
    t = s.get_task(p.id)
    if t is None:
        return Reply(409)
    if t.state == TaskState.FULFILLED:
        return _claimed(t, p)  # the stored promise, unprojected
    if t.state == TaskState.PENDING:
        # Lean does not check the promise's deadline here: a dead task is re-acquired.
        t = replace(
            t,
            state=TaskState.ACQUIRED,
            version=t.version + 1,
            ttl=req.ttl,
            pid=req.pid,
            resumes=(),
        )
        s.set_task(t)
        s.del_task_timeout(t.id)
        s.set_task_timeout(t.id, LEASE, now + req.ttl)
        return _claimed(t, p)
    return Reply(409)


def task_acquire(s: ServerState, req: TaskAcquireRequest, now: int) -> Reply:
    """T-03."""
    guarded = _guard(s, req.id, req.version, TaskState.PENDING, now)
    if isinstance(guarded, Reply):
        return guarded
    t, p = guarded
    t = replace(
        t, state=TaskState.ACQUIRED, version=t.version + 1, ttl=req.ttl, pid=req.pid, resumes=()
    )
    s.set_task(t)
    s.del_task_timeout(t.id)
    s.set_task_timeout(t.id, LEASE, now + req.ttl)
    return _claimed(t, p)


def task_fence(s: ServerState, req: TaskFenceRequest, now: int) -> Reply:
    """T-04. The inner operation's own status (e.g. a 404 settle) rides inside a 200."""
    guarded = _guard(s, req.id, req.version, TaskState.ACQUIRED, now)
    if isinstance(guarded, Reply):
        return guarded
    action = req.action
    if isinstance(action.data, PromiseCreateRequest):
        inner = promise_create(s, action.data, now)
    else:
        inner = promise_settle(s, action.data, now)
    return Reply(200, TaskFenceResult(action.kind, inner, []))


def task_heartbeat(s: ServerState, req: TaskHeartbeatRequest, now: int) -> Reply:
    """T-05. Extends each listed lease that is still this process's and still live."""
    for ref in req.tasks:
        t = s.get_task(ref.id)
        if t is None:
            continue
        if t.state == TaskState.ACQUIRED and t.version == ref.version and t.pid == req.pid:
            p = s.get_promise(t.id)
            if p is not None and p.state == PromiseState.PENDING and p.timeout_at > now:
                s.del_task_timeout(t.id)
                s.set_task_timeout(t.id, LEASE, now + (t.ttl or 0))
    return Reply(200, EMPTY)


def task_suspend(s: ServerState, req: TaskSuspendRequest, now: int) -> Reply:
    """T-06. 422 if an awaited promise is missing; 300 if one is already settled or dead."""
    guarded = _guard(s, req.id, req.version, TaskState.ACQUIRED, now)
    if isinstance(guarded, Reply):
        return guarded
    t, _ = guarded
    settled = False
    for action in req.actions:
        pa = s.get_promise(action.data.awaited)
        if pa is None:
            return Reply(422)
        if pa.state != PromiseState.PENDING or pa.timeout_at <= now:
            settled = True
    if settled:
        # The task keeps its lease; the resumes it had buffered are dropped.
        s.set_task(replace(t, resumes=()))
        return Reply(300, TaskSuspendedResponse(preload=[]))
    for action in req.actions:
        pa = s.get_promise(action.data.awaited)
        if pa is not None:
            s.set_promise(pa.add_callback(req.id))
    s.set_task(replace(t, state=TaskState.SUSPENDED, pid=None, ttl=None, resumes=()))
    s.del_task_timeout(t.id)
    return Reply(200, EMPTY)


def task_fulfill(s: ServerState, req: TaskFulfillRequest, now: int) -> Reply:
    """T-07. Settles the task's own promise (Lean ignores ``action.id``)."""
    guarded = _guard(s, req.id, req.version, TaskState.ACQUIRED, now)
    if isinstance(guarded, Reply):
        return guarded
    t, p = guarded
    listeners = p.listeners
    callbacks = p.callbacks
    p = replace(
        p,
        state=PromiseState(req.action.data.state),
        value=req.action.data.value,
        settled_at=now,
        callbacks=(),
        listeners=(),
    )
    s.set_promise(p)
    s.del_promise_timeout(p.id)
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
    return Reply(200, PromiseResponse(p.to_record()))


def task_release(s: ServerState, req: TaskReleaseRequest, now: int) -> Reply:
    """T-08. Version and resumes are kept; the execute re-offers the same version."""
    guarded = _guard(s, req.id, req.version, TaskState.ACQUIRED, now)
    if isinstance(guarded, Reply):
        return guarded
    t, p = guarded
    t = replace(t, state=TaskState.PENDING, pid=None, ttl=None)
    s.set_task(t)
    s.del_task_timeout(t.id)
    s.set_task_timeout(t.id, RETRY, now + s.config.retry_timeout)
    s.set_message(target_of(p), execute_message(t.id, t.version))
    return Reply(200, EMPTY)


def task_halt(s: ServerState, req: TaskHaltRequest, now: int) -> Reply:
    """T-09. The promise is not read; callbacks of a halted task stay registered."""
    t = s.get_task(req.id)
    if t is None:
        return Reply(404)
    if t.state == TaskState.FULFILLED:
        return Reply(409)
    if t.state == TaskState.HALTED:
        return Reply(200, EMPTY)
    s.set_task(replace(t, state=TaskState.HALTED, pid=None, ttl=None))
    s.del_task_timeout(t.id)
    return Reply(200, EMPTY)


def task_continue(s: ServerState, req: TaskContinueRequest, now: int) -> Reply:
    """T-10. No deadline check; a halted task holds no timeout, so none is deleted first."""
    t = s.get_task(req.id)
    if t is None:
        return Reply(404)
    if t.state != TaskState.HALTED:
        return Reply(409)
    p = s.get_promise(t.id)
    if p is None:
        return Reply(404)
    t = replace(t, state=TaskState.PENDING)
    s.set_task(t)
    s.set_task_timeout(t.id, RETRY, now + s.config.retry_timeout)
    s.set_message(target_of(p), execute_message(t.id, t.version))
    return Reply(200, EMPTY)
