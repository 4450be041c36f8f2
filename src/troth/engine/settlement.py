"""The settlement chain: what settling a promise sets in motion, in Lean's order.

``settle`` is the tail shared by ``promise.settle``, ``task.fulfill`` and the promise
timeout; ``enqueue_resume`` (Lean's ``spec/02-actions/00-resume.lean``;
docs/references.md#the-abstract-machine) is how a settlement reaches each awaiter. Both run
inside the caller's transaction, so a settlement, its scrub and every message it causes
commit together.
"""

from __future__ import annotations

import dataclasses

from msgspec.structs import replace

from troth.engine import queues
from troth.engine.store import Store, TaskTimeoutKind
from troth.protocol.messages import execute_message, unblock_message
from troth.protocol.records import TARGET, PromiseRecord, PromiseState, TaskState, Value


def settle(
    store: Store,
    promise: PromiseRecord,
    state: PromiseState,
    value: Value,
    settled_at: int,
    now: int,
) -> PromiseRecord:
    """Settle a pending ``promise`` and propagate; return the settled record."""
    listeners = store.listeners(promise.id)
    callbacks = store.callbacks(promise.id)
    settled = replace(promise, state=state, value=value, settled_at=settled_at)
    store.set_promise(settled)
    if listeners or callbacks:
        # Most promises settle with nobody registered: two deletes of nothing saved.
        store.clear_registrations(promise.id)
    store.del_promise_timeout(promise.id)
    task = store.get_task(promise.id)
    if task is not None:
        # Whatever state the task is in, its promise is decided: the task is done.
        store.set_task(task.fulfilled())
        store.del_task_timeout(task.id)
        queues.leave(store, task.id, settled, now)
    # The settled promise can never be resumed again, so its own registrations as an
    # awaiter would only ever wake a finished task: drop them.
    store.scrub(promise.id)
    for address in listeners:
        store.set_message(address, unblock_message(settled))
    for awaiter in callbacks:
        enqueue_resume(store, promise.id, awaiter, now)
    return settled


def enqueue_resume(store: Store, awaited: str, awaiter: str, now: int) -> None:
    """Tell ``awaiter``'s task that ``awaited`` has settled.

    A suspended task becomes pending again, keeping its version (the execute is a wake-up
    hint, not a fresh fencing token), and is offered to its target. A task that is running
    or parked (pending, acquired, halted) only records the resume, once, so its worker can
    see it did not suspend in vain.
    """
    task = store.get_task(awaiter)
    if task is None:
        return
    if task.state == TaskState.SUSPENDED:
        task = dataclasses.replace(task, state=TaskState.PENDING, resumes=(awaited,))
        store.set_task(task)
        promise = store.get_promise(awaiter)
        if promise is not None and not queues.offers(store, task, promise, now):
            return  # it waits in its queue, which offers it when it has room
        store.set_task_timeout(task.id, TaskTimeoutKind.RETRY, now + store.retry_timeout)
        if promise is not None and (target := promise.tags.get(TARGET, "")):
            store.set_message(target, execute_message(task.id, task.version))
    elif task.state != TaskState.FULFILLED and awaited not in task.resumes:
        store.set_task(dataclasses.replace(task, resumes=(*task.resumes, awaited)))
