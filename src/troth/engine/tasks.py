"""The task handlers: T-01 get, T-02 create, T-03 acquire, T-04 fence, T-05 heartbeat,
T-06 suspend, T-07 fulfill, T-08 release, T-09 halt, T-10 continue
(Lean ``spec/02-actions/T-*.lean``, docs/references.md#the-abstract-machine), and troth's
``task.fences`` (a sequence of T-04)."""

from __future__ import annotations

import dataclasses

from troth.engine import queues
from troth.engine.preload import preload
from troth.engine.projection import is_live
from troth.engine.promises import new_promise, promise_create, promise_settle
from troth.engine.settlement import settle
from troth.engine.store import Store, Task, TaskTimeoutKind
from troth.protocol.kinds import Kind
from troth.protocol.messages import execute_message
from troth.protocol.queues import QUEUE_TAG, QUEUED_BY_PROMISE_CREATE
from troth.protocol.records import TARGET, PromiseRecord, PromiseState, TaskState
from troth.protocol.requests import (
    PromiseCreateRequest,
    TaskAcquireRequest,
    TaskContinueRequest,
    TaskCreateRequest,
    TaskFenceRequest,
    TaskFencesRequest,
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
    TaskFencesResult,
    TaskGetResponse,
    TaskSuspendedResponse,
)


def _held(
    store: Store, id: str, version: int, state: TaskState, now: int
) -> tuple[Task, PromiseRecord] | Reply:
    """The guard of every fenced operation, in Lean's order: no task 404; then 409 for no
    promise, the wrong task state, a promise that is no longer live, a stale version."""
    task = store.get_task(id)
    if task is None:
        return Reply(404)
    promise = store.get_promise(task.id)
    if (
        promise is None
        or task.state != state
        or not is_live(promise, now)
        or task.version != version
    ):
        return Reply(409)
    return task, promise


def _acquire(store: Store, task: Task, pid: str, ttl: int, now: int) -> Task:
    """Hand a pending task to ``pid``: the only place a version rises."""
    task = dataclasses.replace(
        task, state=TaskState.ACQUIRED, version=task.version + 1, ttl=ttl, pid=pid, resumes=()
    )
    store.set_task(task)
    store.del_task_timeout(task.id)
    store.set_task_timeout(task.id, TaskTimeoutKind.LEASE, now + ttl)
    return task


def _claimed(store: Store, task: Task, promise: PromiseRecord) -> Reply:
    return Reply(200, TaskClaimResponse(promise, preload(store, promise), task.record()))


def _offer(store: Store, task: Task, promise: PromiseRecord, now: int) -> None:
    """Make ``task`` pending and offer it to its target now, and again every retryTimeout
    (or, in a queue, when the queue has room for it)."""
    store.set_task(task)
    if not queues.offers(store, task, promise, now):
        return
    store.set_task_timeout(task.id, TaskTimeoutKind.RETRY, now + store.retry_timeout)
    store.set_message(promise.tags.get(TARGET, ""), execute_message(task.id, task.version))


def task_get(store: Store, req: TaskGetRequest, now: int) -> Reply:
    """The stored task while its promise is live; once it is not, the task as settlement
    will leave it (fulfilled)."""
    task = store.get_task(req.id)
    if task is None:
        return Reply(404)
    promise = store.get_promise(task.id)
    if promise is None:
        return Reply(404)
    if not is_live(promise, now):
        task = task.fulfilled()
    return Reply(200, TaskGetResponse(task.record()))


def task_create(store: Store, req: TaskCreateRequest, now: int) -> Reply:
    """Create a promise with its task already acquired by the caller, or claim the pending
    task of an existing targeted promise."""
    action = req.action.data
    task: Task | None  # born here, or looked up below
    promise = store.get_promise(action.id)
    if promise is None:
        if QUEUE_TAG in action.tags:
            # Its queue decides when it runs: it cannot be born held by its creator.
            return Reply(400, f"action.data.tags.{QUEUE_TAG}: {QUEUED_BY_PROMISE_CREATE}")
        promise = new_promise(action, now)
        store.set_promise(promise)
        if promise.state != PromiseState.PENDING:
            task = Task(promise.id, TaskState.FULFILLED, 0)
            store.set_task(task)
            return Reply(200, TaskClaimResponse(promise, [], task.record()))
        # Unlike promise.create, the deadline is armed whatever the tags say.
        store.set_promise_timeout(promise.id, promise.timeout_at)
        task = Task(promise.id, TaskState.ACQUIRED, 1, ttl=req.ttl, pid=req.pid)
        store.set_task(task)
        store.set_task_timeout(task.id, TaskTimeoutKind.LEASE, now + req.ttl)
        return _claimed(store, task, promise)
    if TARGET not in promise.tags:
        return Reply(422)
    task = store.get_task(promise.id)
    if task is None:
        return Reply(409)
    if task.state == TaskState.FULFILLED:
        # The stored records, unprojected, as Lean answers them.
        return Reply(200, TaskClaimResponse(promise, [], task.record()))
    if task.state != TaskState.PENDING or not queues.admitted(store, task.id, promise):
        return Reply(409)
    # Lean does not check the promise's liveness here: a dead task is claimed too.
    return _claimed(store, _acquire(store, task, req.pid, req.ttl, now), promise)


def task_acquire(store: Store, req: TaskAcquireRequest, now: int) -> Reply:
    held = _held(store, req.id, req.version, TaskState.PENDING, now)
    if isinstance(held, Reply):
        return held
    task, promise = held
    if not queues.admitted(store, task.id, promise):
        return Reply(409)  # waiting in its queue: not offered to anyone yet
    return _claimed(store, _acquire(store, task, req.pid, req.ttl, now), promise)


def task_fence(
    store: Store, req: TaskFenceRequest, now: int, *, with_preload: bool = True
) -> Reply:
    """Run a promise.create or promise.settle only while the caller holds the task.

    ``with_preload=False`` answers with an empty preload, as each fence of a
    ``task.fences`` is answered; a ``task.fence`` request always gets its preload."""
    held = _held(store, req.id, req.version, TaskState.ACQUIRED, now)
    if isinstance(held, Reply):
        return held
    _, promise = held
    data = req.action.data
    if isinstance(data, PromiseCreateRequest):
        kind, inner = Kind.PROMISE_CREATE, promise_create(store, data, now)
    else:
        kind, inner = Kind.PROMISE_SETTLE, promise_settle(store, data, now)
    # Computed after the inner operation, so it may include the promise just settled.
    branch = preload(store, promise) if with_preload else []
    return Reply(200, TaskFenceResult(kind, inner, branch))


def task_fences(store: Store, req: TaskFencesRequest, now: int) -> Reply:
    """troth's extension: ``task.fence {id, version, action}`` for each action in order, at
    one instant, in the caller's one transaction; no fence computes a preload (the caller
    learns its own writes from the replies). A fence refused (404, 409) does not stop the
    ones after it, exactly as the separate requests would not."""
    fences = []
    for action in req.actions:
        fenced = task_fence(
            store, TaskFenceRequest(req.id, req.version, action), now, with_preload=False
        )
        # Each reply as the wire carries it: a refusal with the message task.fence words.
        if fenced.status != 200:
            fenced = Reply(fenced.status, Kind.TASK_FENCE.message(fenced.status))
        fences.append(fenced)
    return Reply(200, TaskFencesResult(fences))


def task_heartbeat(store: Store, req: TaskHeartbeatRequest, now: int) -> Reply:
    """Extend the lease of each listed task the caller still holds; ignore the rest."""
    for ref in req.tasks:
        task = store.get_task(ref.id)
        if (
            task is None
            or task.state != TaskState.ACQUIRED
            or task.version != ref.version
            or task.pid != req.pid
        ):
            continue
        promise = store.get_promise(task.id)
        if promise is not None and is_live(promise, now):
            store.del_task_timeout(task.id)
            store.set_task_timeout(task.id, TaskTimeoutKind.LEASE, now + (task.ttl or 0))
    return Reply(200, EMPTY)


def task_suspend(store: Store, req: TaskSuspendRequest, now: int) -> Reply:
    """Park the task on the promises it awaits, or answer 300 if one is already decided.

    Every awaited promise is looked up before anything is written, so a missing one (422)
    wins over a settled one (300). On 300 the task stays acquired with its lease and loses
    its buffered resumes: the worker is about to see the settled promise anyway.
    """
    held = _held(store, req.id, req.version, TaskState.ACQUIRED, now)
    if isinstance(held, Reply):
        return held
    task, promise = held
    settled = False
    for action in req.actions:
        awaited = store.get_promise(action.data.awaited)
        if awaited is None:
            return Reply(422)
        settled = settled or not is_live(awaited, now)
    if settled:
        store.set_task(dataclasses.replace(task, resumes=()))
        return Reply(300, TaskSuspendedResponse(preload(store, promise)))
    for action in req.actions:
        # The awaiter is the task itself, whatever the action names.
        store.add_callback(action.data.awaited, req.id)
    store.set_task(
        dataclasses.replace(task, state=TaskState.SUSPENDED, pid=None, ttl=None, resumes=())
    )
    store.del_task_timeout(task.id)
    queues.leave(store, task.id, promise, now)
    return Reply(200, EMPTY)


def task_fulfill(store: Store, req: TaskFulfillRequest, now: int) -> Reply:
    """Settle the task's own promise (which fulfils the task) while holding it."""
    held = _held(store, req.id, req.version, TaskState.ACQUIRED, now)
    if isinstance(held, Reply):
        return held
    _, promise = held
    action = req.action.data
    settled = settle(store, promise, PromiseState(action.state), action.value, now, now)
    return Reply(200, PromiseResponse(settled))


def task_release(store: Store, req: TaskReleaseRequest, now: int) -> Reply:
    """Give the task back: pending again at the same version, offered anew."""
    held = _held(store, req.id, req.version, TaskState.ACQUIRED, now)
    if isinstance(held, Reply):
        return held
    task, promise = held
    store.del_task_timeout(task.id)
    _offer(
        store, dataclasses.replace(task, state=TaskState.PENDING, pid=None, ttl=None), promise, now
    )
    return Reply(200, EMPTY)


def task_halt(store: Store, req: TaskHaltRequest, now: int) -> Reply:
    """Take the task out of circulation until ``task.continue``; its callbacks stay."""
    task = store.get_task(req.id)
    if task is None:
        return Reply(404)
    if task.state == TaskState.FULFILLED:
        return Reply(409)
    if task.state != TaskState.HALTED:
        store.set_task(dataclasses.replace(task, state=TaskState.HALTED, pid=None, ttl=None))
        store.del_task_timeout(task.id)
        if (promise := store.get_promise(task.id)) is not None:
            queues.leave(store, task.id, promise, now)
    return Reply(200, EMPTY)


def task_continue(store: Store, req: TaskContinueRequest, now: int) -> Reply:
    """Return a halted task to circulation, keeping its version and buffered resumes."""
    task = store.get_task(req.id)
    if task is None:
        return Reply(404)
    if task.state != TaskState.HALTED:
        return Reply(409)
    promise = store.get_promise(task.id)
    if promise is None:
        return Reply(404)
    _offer(store, dataclasses.replace(task, state=TaskState.PENDING), promise, now)
    return Reply(200, EMPTY)
