"""The machine's effects: what a handler may do to state, and nothing more.

The Lean machine (``spec/01-objects/state.lean``; docs/references.md#the-abstract-machine)
touches state only through a handful of effects: look up or upsert a promise, task or
schedule; arm or disarm the three kinds of timeouts; append to a promise's callbacks or
listeners; upsert an outbox message; and the settlement scrub. ``Store`` is that list as a
Python protocol, plus the read-only queries the extensions (search, preload) and the
timeouts loop need. A backend implements it over one open transaction; the handlers in this
package are written once against it.

Promises are kept as wire ``PromiseRecord`` values; their callbacks and listeners, which
Lean keeps on the promise object, are separate effects here because a database keeps them
in tables of their own. Tasks need the list of resumes, which the wire record only counts,
so they have an object of their own (``Task``).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Generator
from typing import NamedTuple, Protocol

from troth.protocol.messages import ExecuteData, Message
from troth.protocol.queues import QueueSpec
from troth.protocol.records import PromiseRecord, PromiseState, Schedule, TaskRecord, TaskState


@dataclasses.dataclass(frozen=True, slots=True)
class Task:
    """Lean's ``TaskObject``: the id is its promise's id, ``resumes`` lists awaited ids."""

    id: str
    state: TaskState
    version: int
    ttl: int | None = None
    pid: str | None = None
    resumes: tuple[str, ...] = ()

    def record(self) -> TaskRecord:
        return TaskRecord(self.id, self.state, self.version, len(self.resumes), self.ttl, self.pid)

    def fulfilled(self) -> Task:
        """The task as settlement leaves it: done, unleased, nothing buffered; version kept."""
        return dataclasses.replace(self, state=TaskState.FULFILLED, pid=None, ttl=None, resumes=())


@dataclasses.dataclass(frozen=True, slots=True)
class Queue:
    """A declared queue (``troth.engine.queues``): its spec and its counters. ``running``
    counts the entries holding a slot, ``waiting`` those in line; ``turn`` the slots ever
    granted (a key's ``served``
    is the turn of its last grant: round robin); ``seq`` the entries ever queued (FIFO)."""

    spec: QueueSpec
    running: int = 0
    waiting: int = 0
    turn: int = 0
    seq: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class QueueKey:
    """One key of a queue, kept while it has entries. ``priority`` is the best priority
    among its waiting entries (0 in a queue without priorities, whose entries all have 0);
    ``ready_at`` the instant its own rate lets it start again."""

    queue: str
    key: str
    running: int = 0
    waiting: int = 0
    served: int = 0
    priority: int = 0
    ready_at: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class QueueEntry:
    """A task in a queue: ``admitted`` once it holds a slot, waiting for one before."""

    task: str
    queue: str
    key: str
    priority: int
    seq: int
    admitted: bool = False


class TaskTimeoutKind(enum.IntEnum):
    """Lean's task timeout ``kind``; a task timeout is keyed by (id, kind)."""

    RETRY = 0  # a pending task is offered again
    LEASE = 1  # an acquired task's lease expires


class TimeoutKind(enum.IntEnum):
    """Which transition a due timeout fires, in the order ties are broken at one instant."""

    PROMISE = 0
    TASK_RETRY = 1
    TASK_LEASE = 2
    SCHEDULE = 3


class Timeout(NamedTuple):
    """One armed timeout. Tuples compare as the firing order: deadline, then kind, then id."""

    at: int
    kind: TimeoutKind
    id: str


def task_timeout(kind: TaskTimeoutKind) -> TimeoutKind:
    return TimeoutKind.TASK_RETRY if kind is TaskTimeoutKind.RETRY else TimeoutKind.TASK_LEASE


class Store(Protocol):
    """The effects of the abstract machine over one open transaction.

    Every method sees the writes made before it in the same transaction, as Lean's
    sequential state monad does.
    """

    @property
    def retry_timeout(self) -> int:
        """Lean's ``config.retryTimeout`` (ms): how long a pending task waits to be re-offered."""
        ...

    # -- promises ---------------------------------------------------------------------------

    def get_promise(self, id: str) -> PromiseRecord | None: ...

    def set_promise(self, promise: PromiseRecord) -> None:
        """Insert or replace the record; callbacks and listeners are left as they are."""
        ...

    def callbacks(self, id: str) -> list[str]:
        """The awaiter ids registered on promise ``id``, in registration order."""
        ...

    def listeners(self, id: str) -> list[str]:
        """The addresses registered on promise ``id``, in registration order."""
        ...

    def add_callback(self, awaited: str, awaiter: str) -> None:
        """Append ``awaiter`` to ``awaited``'s callbacks unless already there."""
        ...

    def add_listener(self, awaited: str, address: str) -> None:
        """Append ``address`` to ``awaited``'s listeners unless already there."""
        ...

    def clear_registrations(self, id: str) -> None:
        """Empty promise ``id``'s callbacks and listeners (a settlement takes them)."""
        ...

    def scrub(self, settled: str) -> None:
        """The settlement scrub: remove ``settled`` from every pending promise's callbacks."""
        ...

    # -- tasks and schedules ----------------------------------------------------------------

    def get_task(self, id: str) -> Task | None: ...

    def set_task(self, task: Task) -> None: ...

    def get_schedule(self, id: str) -> Schedule | None: ...

    def set_schedule(self, schedule: Schedule) -> None: ...

    def del_schedule(self, id: str) -> None: ...

    # -- timeouts ---------------------------------------------------------------------------

    def set_promise_timeout(self, id: str, at: int) -> None: ...

    def del_promise_timeout(self, id: str) -> None: ...

    def set_task_timeout(self, id: str, kind: TaskTimeoutKind, at: int) -> None:
        """Upsert by (id, kind): arming one kind leaves the other kind's entry alone."""
        ...

    def del_task_timeout(self, id: str) -> None:
        """Remove both kinds."""
        ...

    def set_schedule_timeout(self, id: str, at: int) -> None: ...

    def del_schedule_timeout(self, id: str) -> None: ...

    def next_timeout(self) -> Timeout | None:
        """The armed timeout that fires first (earliest ``Timeout`` in tuple order)."""
        ...

    def is_armed(self, timeout: Timeout) -> bool:
        """True when exactly this entry (kind, id and deadline) is still armed."""
        ...

    def disarm(self, timeout: Timeout) -> None:
        """Remove exactly this entry (for a task timeout: only its own kind)."""
        ...

    def defer(self, timeout: Timeout) -> None:
        """Mark this retry entry deferred, leaving it armed as it is: the server's timeouts
        loop passes it by until its execute is delivered (``timeouts.defer_idle_retry``).
        Arming the task's timeouts again (``set_task_timeout``) clears the mark."""
        ...

    # -- outbox -----------------------------------------------------------------------------

    def set_message(self, address: str, message: Message) -> None:
        """Keyed upsert (see ``outbox_key``): a newer message replaces the one it supersedes."""
        ...

    def is_waiting(self, address: str, message: Message) -> bool:
        """Whether exactly this message is in the outbox at its key: enqueued and not yet
        delivered (delivery removes a row once it has arrived)."""
        ...

    # -- queues (troth's extension: ``troth.engine.queues``) ---------------------------------

    def get_queue(self, name: str) -> Queue | None: ...

    def set_queue(self, queue: Queue) -> None: ...

    def get_queue_key(self, queue: str, key: str) -> QueueKey | None: ...

    def set_queue_key(self, key: QueueKey) -> None:
        """Upsert; a key with no entries left (running and waiting 0) is deleted."""
        ...

    def next_queue_key(self, queue: str, limit: int | None, now: int) -> QueueKey | None:
        """The key to serve next: among those with a waiting entry, fewer than ``limit``
        running and ``ready_at <= now``, the best priority, then the one served longest
        ago, then the least key."""
        ...

    def busiest_queue_keys(self, queue: str, limit: int) -> list[QueueKey]:
        """Up to ``limit`` keys of the queue, most entries (running + waiting) first."""
        ...

    def queue_position(self, task: str) -> int:
        """The 1-based place of waiting task ``task`` in its key's line, by (priority,
        seq): the waiting entries of its queue and key served before it, plus one."""
        ...

    def search_queues(self, after: str | None, limit: int) -> list[Queue]:
        """Up to ``limit`` queues with name > ``after``, by name."""
        ...

    def get_queue_entry(self, task: str) -> QueueEntry | None: ...

    def set_queue_entry(self, entry: QueueEntry) -> None: ...

    def del_queue_entry(self, task: str) -> None: ...

    def queue_head(self, queue: str, key: str) -> QueueEntry | None:
        """The key's first waiting entry: by priority, then first come first served."""
        ...

    def add_queue_start(self, queue: str, key: str, at: int) -> None:
        """Log a start, for the rate limits' sliding windows."""
        ...

    def queue_starts(self, queue: str, key: str | None, since: int, limit: int) -> list[int]:
        """The newest ``limit`` starts after ``since`` (of one key, or of the whole queue),
        oldest first."""
        ...

    def forget_queue_starts(self, queue: str, before: int) -> None:
        """Drop the starts no window reaches any more."""
        ...

    def debounced(self, queue: str, key: str) -> str | None:
        """The last debounced start of the queue's key (``troth.engine.debounce``)."""
        ...

    def set_debounced(self, queue: str, key: str, task: str) -> None: ...

    # -- queries of the extensions ----------------------------------------------------------

    def search_promises(
        self, state: PromiseState | None, tags: dict[str, str], after: str | None, limit: int
    ) -> Generator[PromiseRecord, None, None]:
        """Up to ``limit`` stored promises with id > ``after``, by id, filtered by exact
        stored state and tag containment; read as they are taken, and no further once
        the generator is closed (so a caller may stop early without holding them all)."""
        ...

    def search_tasks(
        self, state: TaskState | None, after: str | None, limit: int
    ) -> Generator[Task, None, None]:
        """As ``search_promises``, filtered by exact stored state."""
        ...

    def search_schedules(
        self, tags: dict[str, str], after: str | None, limit: int
    ) -> Generator[Schedule, None, None]:
        """As ``search_promises``, with containment on ``promiseTags``."""
        ...

    def settled_in_branch(self, branch: str, excluding: str) -> list[PromiseRecord]:
        """Stored promises that are not pending and whose ``resonate:branch`` tag is
        ``branch``, except ``excluding``, by id."""
        ...


class OutboxKey(NamedTuple):
    """Lean's ``OutboxEntry.key``, kept as a tuple so no id can collide with another key.

    An execute is keyed by its task alone (the newest execute for a task replaces any older
    one, whatever its address); an unblock by its promise and its address.
    """

    kind: str
    id: str
    address: str


def outbox_key(address: str, message: Message) -> OutboxKey:
    data = message.data
    if isinstance(data, ExecuteData):
        return OutboxKey("execute", data.task.id, "")
    return OutboxKey("unblock", data.promise.id, address)
