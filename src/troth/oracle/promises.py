"""The promise handlers P-01..P-05, one function each.

Lean's ``spec/02-actions/P-0*.lean`` (docs/references.md#the-abstract-machine).

Each takes the state, the typed request and ``now`` and answers a ``Reply``. The settlement
tail is written out in ``promise_settle`` as Lean writes it at each of its three sites
(here, ``task_fulfill`` and ``on_promise_timeout``): the oracle mirrors the spec's text so a
reader can check it line by line.
"""

from __future__ import annotations

from dataclasses import replace

from troth.oracle.resume import enqueue_resume
from troth.oracle.state import (
    RETRY,
    PromiseObject,
    ServerState,
    TaskObject,
    projected,
)
from troth.protocol.messages import execute_message, unblock_message
from troth.protocol.records import DELAY, TARGET, PromiseState, TaskState, is_timer
from troth.protocol.requests import (
    PromiseCreateRequest,
    PromiseGetRequest,
    PromiseRegisterCallbackRequest,
    PromiseRegisterListenerRequest,
    PromiseSettleRequest,
)
from troth.protocol.responses import PromiseResponse, Reply


def _ok(p: PromiseObject) -> Reply:
    return Reply(200, PromiseResponse(p.to_record()))


def promise_get(s: ServerState, req: PromiseGetRequest, now: int) -> Reply:
    """P-01."""
    p = s.get_promise(req.id)
    if p is None:
        return Reply(404)
    if p.state == PromiseState.PENDING:
        if p.timeout_at <= now:
            return _ok(projected(p))
        return _ok(p)
    return _ok(p)


def promise_create(s: ServerState, req: PromiseCreateRequest, now: int) -> Reply:
    """P-02. Also run by ``task.fence`` and by the schedule's ``catchUp``."""
    retry_timeout = s.config.retry_timeout
    existing = s.get_promise(req.id)
    if existing is None:
        if req.timeout_at > now:
            p = PromiseObject(
                id=req.id,
                state=PromiseState.PENDING,
                param=req.param,
                tags=req.tags,
                timeout_at=req.timeout_at,
                created_at=now,
            )
            s.set_promise(p)
            if p.external:
                s.set_promise_timeout(p.id, p.timeout_at)
            target = p.tags.get(TARGET)
            if target is None:
                return _ok(p)
            t = TaskObject(id=p.id, state=TaskState.PENDING, version=0)
            s.set_task(t)
            delay_str = p.tags.get(DELAY)
            if delay_str is None:
                s.set_task_timeout(t.id, RETRY, now + retry_timeout)
                s.set_message(target, execute_message(t.id, t.version))
                return _ok(p)
            delay = _to_nat(delay_str)
            if delay > now:
                s.set_task_timeout(t.id, RETRY, delay)
                return _ok(p)
            s.set_task_timeout(t.id, RETRY, now + retry_timeout)
            s.set_message(target, execute_message(t.id, t.version))
            return _ok(p)
        # Born past its deadline: stored settled, as the timeout would have left it.
        state = PromiseState.RESOLVED if is_timer(req.tags) else PromiseState.REJECTED_TIMEDOUT
        p = PromiseObject(
            id=req.id,
            state=state,
            param=req.param,
            tags=req.tags,
            timeout_at=req.timeout_at,
            created_at=req.timeout_at,
            settled_at=req.timeout_at,
        )
        s.set_promise(p)
        if TARGET in p.tags:
            s.set_task(TaskObject(id=p.id, state=TaskState.FULFILLED, version=0))
            return _ok(p)
        return _ok(p)
    p = existing
    if p.state == PromiseState.PENDING and p.timeout_at <= now:
        return _ok(projected(p))
    return _ok(p)


def _to_nat(text: str) -> int:
    """Lean's ``String.toNat!``: a panic (non-numeric text) yields 0 in compiled Lean."""
    return int(text) if text.isascii() and text.isdigit() else 0


def promise_settle(s: ServerState, req: PromiseSettleRequest, now: int) -> Reply:
    """P-03."""
    p = s.get_promise(req.id)
    if p is None:
        return Reply(404)
    if p.state == PromiseState.PENDING:
        if p.timeout_at > now:
            listeners = p.listeners
            callbacks = p.callbacks
            p = replace(
                p,
                state=PromiseState(req.state),
                value=req.value,
                settled_at=now,
                callbacks=(),
                listeners=(),
            )
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
            return _ok(p)
        return _ok(projected(p))
    return _ok(p)


def promise_register_callback(
    s: ServerState, req: PromiseRegisterCallbackRequest, now: int
) -> Reply:
    """P-04. A settled or dead awaited promise is answered and nothing is written."""
    p_awaited = s.get_promise(req.awaited)
    if p_awaited is None:
        return Reply(404)
    p_awaiter = s.get_promise(req.awaiter)
    if p_awaiter is None:
        return Reply(422)
    if TARGET not in p_awaiter.tags:
        return Reply(422)
    if p_awaited.state == PromiseState.PENDING:
        if p_awaited.timeout_at > now:
            if p_awaiter.state == PromiseState.PENDING and p_awaiter.timeout_at > now:
                s.set_promise(p_awaited.add_callback(req.awaiter))
            return _ok(p_awaited)
        return _ok(projected(p_awaited))
    return _ok(p_awaited)


def promise_register_listener(
    s: ServerState, req: PromiseRegisterListenerRequest, now: int
) -> Reply:
    """P-05."""
    p_awaited = s.get_promise(req.awaited)
    if p_awaited is None:
        return Reply(404)
    if p_awaited.state == PromiseState.PENDING:
        if p_awaited.timeout_at > now:
            s.set_promise(p_awaited.add_listener(req.address))
            return _ok(p_awaited)
        return _ok(projected(p_awaited))
    return _ok(p_awaited)
