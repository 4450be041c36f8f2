"""Debounce: starts of one key of a queue within a window collapse into the last one.

A promise tagged ``troth:debounce`` (a window in ms, with its ``troth:queue`` and key) does
not join its queue's line when it is created: it waits out the window first, exactly as a
``resonate:delay`` waits (its task's retry timeout is armed at the window's end, and the
queue takes it then, ``queues.on_retry``). A later debounced start of the same queue and key
that arrives while it still waits *supersedes* it: the earlier promise is resolved at once
with no data and the header ``troth:debounced-into`` naming the later one, and the later
one waits a whole window of its own. So a burst of starts runs once, with the last start's
arguments, a window after the burst ended (the trailing edge, as DBOS's debouncer and
Inngest's debounce do); every earlier handle follows the pointers to that run's result.

Which start of a key is still waiting is one row per (queue, key), kept by
``Store.debounced``/``set_debounced``; the row is only believed while its task still waits
out its window (pending, with no queue entry), so nothing needs to clear it when the window
ends or the promise settles some other way.
"""

from __future__ import annotations

from troth.engine.settlement import settle
from troth.engine.store import Store, TaskTimeoutKind
from troth.protocol.queues import DEBOUNCE_TAG, DEBOUNCED_HEADER, QUEUE_KEY_TAG, QUEUE_TAG
from troth.protocol.records import PromiseRecord, PromiseState, TaskState, Value


def window(tags: dict[str, str]) -> int | None:
    """The debounce window of a promise to create (validated digits), or None."""
    text = tags.get(DEBOUNCE_TAG)
    return int(text) if text is not None else None


def hold(store: Store, promise: PromiseRecord, span: int, now: int) -> None:
    """Make the just-created ``promise`` wait out its window before it queues, superseding
    the start of its key that is still waiting out its own."""
    queue, key = promise.tags[QUEUE_TAG], promise.tags.get(QUEUE_KEY_TAG, "")
    store.get_queue(queue)  # first: on PostgreSQL it takes the queue's lock, so two starts
    # of one key at once supersede one after the other, never both the same earlier one
    earlier = store.debounced(queue, key)
    if earlier is not None and earlier != promise.id and _waiting(store, earlier):
        superseded = store.get_promise(earlier)
        if superseded is not None:
            pointer = Value(headers={DEBOUNCED_HEADER: promise.id})
            settle(store, superseded, PromiseState.RESOLVED, pointer, now, now)
    store.set_debounced(queue, key, promise.id)
    store.set_task_timeout(promise.id, TaskTimeoutKind.RETRY, now + span)


def _waiting(store: Store, id: str) -> bool:
    """Whether start ``id`` still waits out its window: pending, and not in its line yet."""
    task = store.get_task(id)
    promise = store.get_promise(id)
    return (
        task is not None
        and task.state == TaskState.PENDING
        and promise is not None
        and promise.state == PromiseState.PENDING
        and store.get_queue_entry(id) is None
    )
