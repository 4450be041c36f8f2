"""The promise handlers: P-01 get, P-02 create, P-03 settle, P-04 register_callback and
P-05 register_listener, as Lean's ``spec/02-actions/P-0*.lean`` defines them
(docs/references.md#the-abstract-machine)."""

from __future__ import annotations

from troth.engine import debounce, queues
from troth.engine.projection import is_live, project
from troth.engine.settlement import settle
from troth.engine.store import Store, Task, TaskTimeoutKind
from troth.protocol.messages import execute_message
from troth.protocol.records import (
    DELAY,
    EMPTY_VALUE,
    TARGET,
    PromiseRecord,
    PromiseState,
    TaskState,
    is_timer,
    timed_out_state,
)
from troth.protocol.requests import (
    PromiseCreateRequest,
    PromiseGetRequest,
    PromiseRegisterCallbackRequest,
    PromiseRegisterListenerRequest,
    PromiseSettleRequest,
)
from troth.protocol.responses import PromiseResponse, Reply


def _answer(promise: PromiseRecord) -> Reply:
    return Reply(200, PromiseResponse(promise))


def new_promise(req: PromiseCreateRequest, now: int) -> PromiseRecord:
    """The record a create makes: pending from ``now``, or, when the deadline has already
    passed, settled by that deadline (``createdAt = settledAt = timeoutAt``)."""
    if req.timeout_at > now:
        state, created_at, settled_at = PromiseState.PENDING, now, None
    else:
        state, created_at, settled_at = timed_out_state(req.tags), req.timeout_at, req.timeout_at
    return PromiseRecord(
        id=req.id,
        state=state,
        param=req.param,
        value=EMPTY_VALUE,
        tags=req.tags,
        timeout_at=req.timeout_at,
        created_at=created_at,
        settled_at=settled_at,
    )


def _delay(tags: dict[str, str]) -> int | None:
    """The ``resonate:delay`` instant. The doors admit only digits; anything else (a
    schedule's tags are not checked for it) reads as 0, as Lean's ``toNat!`` does."""
    delay = tags.get(DELAY)
    if delay is None:
        return None
    return int(delay) if delay.isascii() and delay.isdigit() else 0


def promise_get(store: Store, req: PromiseGetRequest, now: int) -> Reply:
    promise = store.get_promise(req.id)
    if promise is None:
        return Reply(404)
    return _answer(project(promise, now))


def promise_create(store: Store, req: PromiseCreateRequest, now: int) -> Reply:
    """Create if absent; an existing promise is answered as it is, nothing compared."""
    existing = store.get_promise(req.id)
    if existing is not None:
        return _answer(project(existing, now))
    if (refused := queues.undeclared(store, req.tags)) is not None:
        return Reply(400, refused)
    promise = new_promise(req, now)
    store.set_promise(promise)
    target = req.tags.get(TARGET)
    if promise.state != PromiseState.PENDING:
        # Born dead: settled by its own deadline, with no timeouts and no messages.
        if target is not None:
            store.set_task(Task(promise.id, TaskState.FULFILLED, 0))
        return _answer(promise)
    # Lean's ``external``: only promises someone else decides need their deadline swept.
    if target is not None or is_timer(req.tags):
        store.set_promise_timeout(promise.id, promise.timeout_at)
    if target is None:
        return _answer(promise)
    task = Task(promise.id, TaskState.PENDING, 0)
    store.set_task(task)
    delay = _delay(req.tags)
    if delay is not None and delay > now:
        # ``resonate:delay`` is an absolute instant: nothing is sent until the retry fires.
        store.set_task_timeout(task.id, TaskTimeoutKind.RETRY, delay)
    elif (span := debounce.window(req.tags)) is not None:
        debounce.hold(store, promise, span, now)  # it queues when its window is over
    elif queues.offers(store, task, promise, now):
        store.set_task_timeout(task.id, TaskTimeoutKind.RETRY, now + store.retry_timeout)
        store.set_message(target, execute_message(task.id, task.version))
    return _answer(promise)


def promise_settle(store: Store, req: PromiseSettleRequest, now: int) -> Reply:
    """Settle a live promise; a dead or settled one is answered as it is, unchanged."""
    promise = store.get_promise(req.id)
    if promise is None:
        return Reply(404)
    if not is_live(promise, now):
        return _answer(project(promise, now))
    return _answer(settle(store, promise, PromiseState(req.state), req.value, now, now))


def promise_register_callback(store: Store, req: PromiseRegisterCallbackRequest, now: int) -> Reply:
    """Register ``awaiter`` to be resumed when ``awaited`` settles.

    Registering on a promise that is already settled (or dead) writes nothing: the caller
    sees the settled record in the answer and needs no resume.
    """
    awaited = store.get_promise(req.awaited)
    if awaited is None:
        return Reply(404)
    awaiter = store.get_promise(req.awaiter)
    if awaiter is None or TARGET not in awaiter.tags:
        return Reply(422)
    if is_live(awaited, now) and is_live(awaiter, now):
        store.add_callback(awaited.id, awaiter.id)
    return _answer(project(awaited, now))


def promise_register_listener(store: Store, req: PromiseRegisterListenerRequest, now: int) -> Reply:
    """Register an address for an unblock message when ``awaited`` settles."""
    awaited = store.get_promise(req.awaited)
    if awaited is None:
        return Reply(404)
    if is_live(awaited, now):
        store.add_listener(awaited.id, req.address)
    return _answer(project(awaited, now))
