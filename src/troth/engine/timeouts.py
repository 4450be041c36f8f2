"""The four internal transitions and ``fire``.

The transitions are Lean's ``spec/02-actions/02-timeouts.lean``
(docs/references.md#the-abstract-machine).

The environment fires a timeout once its deadline is due; the transitions themselves do
not re-check the deadline, as in Lean. ``fire`` adds troth's stale-obligation rule
(docs/semantics.md, debug.tick): an entry its transition left in place unchanged is
dropped, so a due entry can never fire twice and a sweep always ends.

A schedule's catch-up is the one transition whose work Lean leaves unbounded (a server
down for a month owes a per-second cron millions of occurrences), so troth runs it in
chunks (``CatchUp``): one firing creates at most ``chunk`` occurrences, in order, and
re-arms the schedule's timeout at its next missed occurrence, which is still due, so the
sweep fires it again in its place in the firing order. Each chunk commits on its own and
the server answers requests in between. Creating an occurrence writes only its own
promise, task, timeouts and message (or nothing, when the id exists), so the chunks end
in the state Lean's one-shot ``catchUp`` reaches (docs/semantics.md, "Schedule catch-up").

When to fire a due timeout is the environment's choice, and the server's timeouts loop
uses it for one case (``defer_idle_retry``; docs/semantics.md, "Idle retries"): a retry
whose task's execute still waits in the outbox, undelivered, would only rewrite that same
message and move its own deadline, so a backlog no worker can take would cost a
transition per task per retry period. The loop defers such a retry instead: it stays
armed, at its deadline, marked so that the loop passes it by. Firing it late is a run of
the machine whose environment fired it late. It fires when its message is delivered,
at that instant and before the delivery: its deadline becomes ``now + retryTimeout`` and
the message it rewrites, unchanged, is the one delivered, so the delivery's
acknowledgement sets that deadline and nothing else (``troth.storage``'s ``ack``).
``debug.tick`` never defers: it fires every due timeout as Lean does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from msgspec.structs import replace

from troth.engine import queues
from troth.engine.projection import timed_out
from troth.engine.promises import promise_create
from troth.engine.settlement import settle
from troth.engine.store import Store, TaskTimeoutKind, Timeout, TimeoutKind
from troth.protocol.cron import expand, next_cron
from troth.protocol.messages import Message, execute_message
from troth.protocol.records import TARGET, PromiseState, Schedule, TaskState
from troth.protocol.requests import PromiseCreateRequest

# Occurrences one schedule firing creates at most: a few milliseconds of work.
CATCH_UP_CHUNK = 32


@dataclasses.dataclass(frozen=True)
class CatchUp:
    """How a schedule catches up on occurrences missed while no one fired its timeout.

    ``window`` (ms): an occurrence more than ``window`` ms older than the firing that
    reaches it is skipped, not created; None creates every missed occurrence (Lean, the
    default). ``chunk``: the occurrences one firing creates at most; it changes how the
    work is split, never the state it ends in.
    """

    window: int | None = None
    chunk: int = CATCH_UP_CHUNK

    def __post_init__(self) -> None:
        if self.window is not None and self.window < 0:
            raise ValueError("the catch-up window must be >= 0 ms")
        if self.chunk < 1:
            raise ValueError("the catch-up chunk must be >= 1")


LEAN = CatchUp()


def on_promise_timeout(store: Store, id: str, now: int) -> None:
    """Write the verdict the promise's deadline gives it and run the settlement chain."""
    promise = store.get_promise(id)
    if promise is None or promise.state != PromiseState.PENDING:
        return
    verdict = timed_out(promise)
    settle(store, promise, verdict.state, promise.value, promise.timeout_at, now)


def on_task_retry_timeout(store: Store, id: str, now: int) -> None:
    """Offer a still-pending task again, and again after another retryTimeout."""
    task = store.get_task(id)
    if task is None or task.state != TaskState.PENDING:
        return
    promise = store.get_promise(id)
    if promise is not None and queues.on_retry(store, task, promise, now):
        return  # a queued task that holds no slot: its queue moves instead
    store.del_task_timeout(task.id)
    store.set_task_timeout(task.id, TaskTimeoutKind.RETRY, now + store.retry_timeout)
    if promise is not None:
        store.set_message(promise.tags.get(TARGET, ""), execute_message(task.id, task.version))


def on_task_lease_timeout(store: Store, id: str, now: int) -> None:
    """The holder stopped heartbeating: the task is pending again (same version) and offered."""
    task = store.get_task(id)
    if task is None or task.state != TaskState.ACQUIRED:
        return
    store.set_task(dataclasses.replace(task, state=TaskState.PENDING, pid=None, ttl=None))
    store.del_task_timeout(task.id)
    store.set_task_timeout(task.id, TaskTimeoutKind.RETRY, now + store.retry_timeout)
    _send_execute(store, task.id, task.version)


def _send_execute(store: Store, id: str, version: int) -> None:
    execute = _execute(store, id, version)
    if execute is not None:
        store.set_message(*execute)


def _execute(store: Store, id: str, version: int) -> tuple[str, Message] | None:
    """The execute a retry of task ``id`` at ``version`` enqueues, and its address."""
    promise = store.get_promise(id)
    if promise is None:
        return None
    return promise.tags.get(TARGET, ""), execute_message(id, version)


def defer_idle_retry(store: Store, timeout: Timeout) -> bool:
    """Defer a due retry that would change nothing but its own deadline: its task is
    pending and the execute it would enqueue is in the outbox as it would write it, not
    yet delivered. Answers whether it did; a deferred retry stays armed at its deadline
    and fires when that message is delivered (the module docstring)."""
    if timeout.kind is not TimeoutKind.TASK_RETRY:
        return False
    task = store.get_task(timeout.id)
    if task is None or task.state != TaskState.PENDING:
        return False
    promise = store.get_promise(task.id)
    if promise is not None and not queues.admitted(store, task.id, promise):
        return False  # the retry of a task waiting in its queue moves the queue: never idle
    execute = _execute(store, task.id, task.version)
    if execute is None or not store.is_waiting(*execute):
        return False
    store.defer(timeout)
    return True


def on_schedule_timeout(store: Store, id: str, now: int, policy: CatchUp = LEAN) -> int:
    """Create the occurrences due by ``now`` (a chunk of them at most) and arm the next one:
    the next future occurrence, or, with a chunk's worth created, the next missed one.
    Answers how many occurrences it created (the servers' schedule-promises metric)."""
    schedule = store.get_schedule(id)
    if schedule is None:
        return 0
    schedule = skip_missed(schedule, now, policy.window)
    schedule, created = catch_up(store, schedule, now, policy.chunk)
    store.set_schedule(schedule)
    store.del_schedule_timeout(schedule.id)
    store.set_schedule_timeout(schedule.id, schedule.next_run_at)
    return created


def skip_missed(schedule: Schedule, now: int, window: int | None) -> Schedule:
    """Move past the occurrences more than ``window`` ms before ``now``, creating none.

    ``lastRunAt`` stays the last occurrence created. One cron evaluation, however many
    occurrences are skipped.
    """
    if window is None or schedule.next_run_at >= now - window:
        return schedule
    # The first occurrence at or after now - window (next_cron is strictly after).
    return replace(schedule, next_run_at=next_cron(schedule.cron, now - window - 1))


def catch_up(store: Store, schedule: Schedule, now: int, limit: int) -> tuple[Schedule, int]:
    """Create the missed occurrences (``limit`` at most), each as of its own instant, so a
    server that was down creates exactly the promises it would have created had it been up;
    the schedule moved on, and how many occurrences were created."""
    created = 0
    for _ in range(limit):
        if schedule.next_run_at > now:
            break
        at = schedule.next_run_at
        occurrence = PromiseCreateRequest(
            id=expand(schedule.promise_id, schedule.id, at),
            timeout_at=at + schedule.promise_timeout,
            param=schedule.promise_param,
            tags=schedule.promise_tags,
        )
        promise_create(store, occurrence, at)
        schedule = replace(schedule, last_run_at=at, next_run_at=next_cron(schedule.cron, at))
        created += 1
    return schedule, created


TRANSITIONS: dict[TimeoutKind, Callable[[Store, str, int], None]] = {
    TimeoutKind.PROMISE: on_promise_timeout,
    TimeoutKind.TASK_RETRY: on_task_retry_timeout,
    TimeoutKind.TASK_LEASE: on_task_lease_timeout,
}


def fire(
    store: Store, timeout: Timeout, now: int, policy: CatchUp = LEAN, *, defer_idle: bool = False
) -> int:
    """Run the transition of one due timeout at ``now``; a schedule's catches up by
    ``policy``; with ``defer_idle`` (the server's timeouts loop), a retry that would change
    nothing but its own deadline is deferred instead (``defer_idle_retry``). Answers how
    many promises a schedule created (0 for the other kinds)."""
    if defer_idle and defer_idle_retry(store, timeout):
        return 0
    created = 0
    if timeout.kind == TimeoutKind.SCHEDULE:
        created = on_schedule_timeout(store, timeout.id, now, policy)
    else:
        TRANSITIONS[timeout.kind](store, timeout.id, now)
    if store.is_armed(timeout):
        # The transition did not consume its own obligation (its object had moved on):
        # the entry is stale, and left in place it would fire for ever.
        store.disarm(timeout)
    return created
