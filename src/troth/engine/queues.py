"""Queues: flow control for executions, kept by the machine itself (troth's extension).

A promise tagged ``troth:queue`` (with a ``troth:queue-key`` and a ``troth:priority``) is
an execution that runs only when its queue has room. The rule, for every queue:

    A queued task *holds a slot* from the instant it is offered to its target until it
    leaves the pending and acquired states (it settles, suspends or is halted). Offering is
    admission: at most ``concurrency`` tasks of the queue, and ``keyConcurrency`` of one
    key, hold a slot at once, and at most ``rate.limit`` are admitted in any ``rate.period``
    (``keyRate`` per key).

The gate is where the machine offers a task (``offers``): instead of sending the execute,
a task that holds no slot joins its queue's line and is offered when ``pump`` grants it a
slot. Slots are given back where a task stops holding one (``leave``), and every change
pumps the queue, so a slot never waits for a timer. A task keeps its slot across a lease
that lapses and a release: it is offered again at once, as the machine says, ahead of the
line, because it was admitted. A suspended task gives its slot back: an execution awaiting
a child in the same queue would otherwise hold the slot its child needs, and one sleeping
for a day would block the queue for a day. When it resumes it queues again.

Which waiting task a free slot goes to: in a queue with ``priority``, the lowest
``troth:priority`` first; among equals, the key served longest ago (round robin, so a key
with ten thousand waiting never starves a key with one); within a key, first come first
served. Each pass reads the queue's keys, never its waiting line (``Store.next_queue_key``).

A rate limit is a pure function of ``now`` and the log of starts: when it holds the line
back, the task at the head gets its retry timeout armed at the instant the oldest start in
the window leaves it, and that retry pumps the queue instead of offering the task (so a
rate needs no transition of its own, and ``debug.tick`` drives it like any timeout).

A promise without ``troth:queue`` never reaches any of this: every entry point returns on
that tag first, so the official SDKs' requests keep the Lean machine's exact answers.
"""

from __future__ import annotations

import dataclasses

from troth.engine.search import DEFAULT_LIMIT
from troth.engine.store import Queue, QueueEntry, QueueKey, Store, Task, TaskTimeoutKind
from troth.protocol.messages import execute_message
from troth.protocol.queues import (
    PRIORITY_TAG,
    QUEUE_KEY_TAG,
    QUEUE_TAG,
    QueueEntryRecord,
    QueueGetRequest,
    QueueKeyStats,
    QueueRecord,
    QueueResponse,
    QueueSearchRequest,
    QueueSearchResponse,
    QueueSetRequest,
    Rate,
)
from troth.protocol.records import TARGET, PromiseRecord
from troth.protocol.responses import Reply


def undeclared(store: Store, tags: dict[str, str]) -> str | None:
    """Why a promise with these tags may not be created (its queue is not declared)."""
    name = tags.get(QUEUE_TAG)
    if name is None or store.get_queue(name) is not None:
        return None
    return f"tags.{QUEUE_TAG}: no queue named {name!r} is declared (queue.set declares one)"


def offers(store: Store, task: Task, promise: PromiseRecord, now: int) -> bool:
    """Whether the caller offers the pending ``task`` now, as the machine says: when its
    promise is in no queue, or the task holds a slot already. Otherwise the task joins its
    queue's line, and the queue offers it when it grants it a slot (perhaps at once)."""
    name = promise.tags.get(QUEUE_TAG)
    if name is None:
        return True
    entry = store.get_queue_entry(task.id)
    if entry is not None:
        return entry.admitted
    queue = store.get_queue(name)
    if queue is None:
        return True  # its queue was never declared (refused at creation): not queued
    spec = queue.spec
    priority = int(promise.tags.get(PRIORITY_TAG, "0")) if spec.priority else 0
    key_name = promise.tags.get(QUEUE_KEY_TAG, "")
    key = store.get_queue_key(name, key_name) or QueueKey(name, key_name, priority=priority)
    if _room(queue, key, now):
        # Nobody waits and a slot is free: admitted at once, and the caller offers it, as
        # the line would (with one pass over the queue's rows fewer, and no second offer).
        queue = dataclasses.replace(
            queue, running=queue.running + 1, turn=queue.turn + 1, seq=queue.seq + 1
        )
        store.set_queue_entry(QueueEntry(task.id, name, key_name, priority, queue.seq, True))
        store.set_queue_key(
            dataclasses.replace(key, running=key.running + 1, served=queue.turn, priority=0)
        )
        store.set_queue(queue)
        return True
    queue = dataclasses.replace(queue, waiting=queue.waiting + 1, seq=queue.seq + 1)
    entry = QueueEntry(task.id, name, key_name, priority, queue.seq)
    store.set_queue_entry(entry)
    best = min(key.priority, priority) if key.waiting else priority
    store.set_queue_key(dataclasses.replace(key, waiting=key.waiting + 1, priority=best))
    store.set_queue(queue)
    pump(store, name, now)
    return False


def admitted(store: Store, id: str, promise: PromiseRecord) -> bool:
    """Whether task ``id`` may be acquired: it is in no queue, or it holds a slot."""
    if QUEUE_TAG not in promise.tags:
        return True
    entry = store.get_queue_entry(id)
    return entry is not None and entry.admitted


def leave(store: Store, id: str, promise: PromiseRecord, now: int) -> None:
    """Task ``id`` stops holding (or waiting for) a slot: it settled, suspended or halted."""
    if QUEUE_TAG not in promise.tags:
        return
    entry = store.get_queue_entry(id)
    if entry is None:
        return
    queue = store.get_queue(entry.queue)  # first: on PostgreSQL, it takes the queue's lock
    store.del_queue_entry(id)
    key = store.get_queue_key(entry.queue, entry.key)
    if queue is None or key is None:
        return
    if entry.admitted:
        queue = dataclasses.replace(queue, running=queue.running - 1)
        key = dataclasses.replace(key, running=key.running - 1)
    else:
        queue = dataclasses.replace(queue, waiting=queue.waiting - 1)
        key = _next_head(store, dataclasses.replace(key, waiting=key.waiting - 1), queue)
    store.set_queue_key(key)
    store.set_queue(queue)
    if queue.waiting:  # else there is no one to give the slot to
        pump(store, entry.queue, now)


def _room(queue: Queue, key: QueueKey, now: int) -> bool:
    """Whether a new entry of ``key`` is admitted as it arrives: no one waits in the queue,
    a slot is free in it and in the key, and no rate has a start to count."""
    spec = queue.spec
    return (
        not queue.waiting
        and (spec.concurrency is None or queue.running < spec.concurrency)
        and (spec.key_concurrency is None or key.running < spec.key_concurrency)
        and key.ready_at <= now
        and spec.rate is None
        and spec.key_rate is None
    )


def on_retry(store: Store, task: Task, promise: PromiseRecord, now: int) -> bool:
    """The retry timeout of a pending queued task that holds no slot: the first offer of a
    delayed one (it queues now), or the instant a rate lets the line move (pump). Answers
    whether it handled the timeout; a task that holds a slot is retried as usual."""
    if QUEUE_TAG not in promise.tags:
        return False
    entry = store.get_queue_entry(task.id)
    if entry is not None and entry.admitted:
        return False
    store.del_task_timeout(task.id)
    if entry is None:  # a delayed one: admitted at once, it is offered as any retry offers
        return not offers(store, task, promise, now)
    pump(store, entry.queue, now)
    return True


def pump(store: Store, name: str, now: int) -> None:
    """Grant free slots to waiting tasks, in the queue's order, and offer each; when a rate
    holds the line back, arm the head's retry at the instant it lets the next one start."""
    queue = store.get_queue(name)
    if queue is None:
        return
    spec = queue.spec
    while queue.waiting and (spec.concurrency is None or queue.running < spec.concurrency):
        key = store.next_queue_key(name, spec.key_concurrency, now)
        if key is None:
            break  # every key with a line is at its own limit
        head = store.queue_head(name, key.key)
        if head is None:
            break  # unreachable while the counters are right; never spin on them
        wake = _limited(store, name, None, spec.rate, now)
        if wake is not None:
            store.set_task_timeout(head.task, TaskTimeoutKind.RETRY, wake)
            break
        wake = _limited(store, name, key.key, spec.key_rate, now)
        if wake is not None:
            store.set_queue_key(dataclasses.replace(key, ready_at=wake))
            store.set_task_timeout(head.task, TaskTimeoutKind.RETRY, wake)
            continue
        queue = _grant(store, queue, key, head, now)
    store.set_queue(queue)


def _grant(store: Store, queue: Queue, key: QueueKey, entry: QueueEntry, now: int) -> Queue:
    """Give ``entry`` a slot and offer its task, as the machine offers a pending task."""
    task, promise = store.get_task(entry.task), store.get_promise(entry.task)
    store.set_queue_entry(dataclasses.replace(entry, admitted=True))
    queue = dataclasses.replace(
        queue, running=queue.running + 1, waiting=queue.waiting - 1, turn=queue.turn + 1
    )
    key = dataclasses.replace(
        key, running=key.running + 1, waiting=key.waiting - 1, served=queue.turn
    )
    store.set_queue_key(_next_head(store, key, queue))
    spec = queue.spec
    if spec.rate is not None or spec.key_rate is not None:
        store.add_queue_start(queue.spec.name, entry.key, now)
        longest = max(rate.period for rate in (spec.rate, spec.key_rate) if rate is not None)
        store.forget_queue_starts(queue.spec.name, now - longest)
    if task is not None and promise is not None:
        store.set_task_timeout(task.id, TaskTimeoutKind.RETRY, now + store.retry_timeout)
        store.set_message(promise.tags.get(TARGET, ""), execute_message(task.id, task.version))
    return queue


def _next_head(store: Store, key: QueueKey, queue: Queue) -> QueueKey:
    """``key`` with the priority of its first waiting entry (0 when none waits)."""
    if not queue.spec.priority or not key.waiting:
        return dataclasses.replace(key, priority=0)
    head = store.queue_head(key.queue, key.key)
    return dataclasses.replace(key, priority=head.priority if head is not None else 0)


def _limited(store: Store, name: str, key: str | None, rate: Rate | None, now: int) -> int | None:
    """When ``rate`` next lets a start happen, if it does not let one happen ``now``."""
    if rate is None:
        return None
    starts = store.queue_starts(name, key, now - rate.period, rate.limit)
    if len(starts) < rate.limit:
        return None
    return starts[0] + rate.period  # the oldest start in the window leaves it then


# -- the kinds: queue.set, queue.get, queue.search --------------------------------------------


def queue_set(store: Store, req: QueueSetRequest, now: int) -> Reply:
    """Declare a queue or change its limits. Tasks holding a slot keep it, even over a
    lowered limit (the queue admits none until it is under again); a raised limit admits
    waiting tasks at once."""
    existing = store.get_queue(req.queue.name)
    queue = Queue(req.queue) if existing is None else dataclasses.replace(existing, spec=req.queue)
    store.set_queue(queue)
    pump(store, queue.spec.name, now)
    return Reply(200, QueueResponse(_record(store, req.queue.name, now, keys=False)))


def queue_get(store: Store, req: QueueGetRequest, now: int) -> Reply:
    if store.get_queue(req.name) is None:
        return Reply(404)
    record = _record(store, req.name, now, keys=True)
    return Reply(200, QueueResponse(record, _entry(store, req.name, req.task)))


def _entry(store: Store, name: str, task: str | None) -> QueueEntryRecord | None:
    """Where ``task`` stands in queue ``name``: none when it is not in its line (not queued
    yet, gone, or in another queue)."""
    entry = store.get_queue_entry(task) if task is not None else None
    if entry is None or entry.queue != name:
        return None
    position = None if entry.admitted else store.queue_position(entry.task)
    return QueueEntryRecord(entry.key, entry.priority, entry.admitted, position)


def queue_search(store: Store, req: QueueSearchRequest, now: int) -> Reply:
    limit = req.limit or DEFAULT_LIMIT
    names = [queue.spec.name for queue in store.search_queues(req.cursor, limit + 1)]
    more = len(names) > limit
    records = [_record(store, name, now, keys=False) for name in names[:limit]]
    return Reply(200, QueueSearchResponse(records, names[limit - 1] if more else None))


BUSIEST_KEYS = 20  # the keys a queue.get lists


def _record(store: Store, name: str, now: int, *, keys: bool) -> QueueRecord:
    queue = store.get_queue(name)
    assert queue is not None
    limited = _limited(store, name, None, queue.spec.rate, now) if queue.waiting else None
    stats = [
        QueueKeyStats(k.key, k.running, k.waiting, k.ready_at if k.ready_at > now else None)
        for k in (store.busiest_queue_keys(name, BUSIEST_KEYS) if keys else [])
    ]
    return QueueRecord(queue.spec, queue.running, queue.waiting, stats, limited)
