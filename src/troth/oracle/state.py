"""The machine's state and its effects: Lean's ``spec/01-objects/state.lean`` in Python.

The machine is pinned at 83d64c3 (docs/references.md#the-abstract-machine).

Objects are frozen dataclasses updated with ``replace``, as Lean's ``{ p with … }`` builds a
new value; the ledgers (``callbacks``, ``listeners``, ``resumes``) are tuples so no two
versions of an object can share a mutable list. Every collection in ``ServerState`` keeps
Lean's list order: an upsert removes the old row and puts the new one at the head.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from troth.protocol.messages import Execute, Message
from troth.protocol.records import (
    EMPTY_VALUE,
    TARGET,
    PromiseRecord,
    PromiseState,
    Schedule,
    Tags,
    TaskRecord,
    TaskState,
    Value,
    is_timer,
)

# Task timeout kinds (Lean's ``TaskTimeout.kind``).
RETRY = 0  # a pending task's next execute
LEASE = 1  # an acquired task's lease expiry


@dataclass(frozen=True)
class PromiseObject:
    id: str
    state: PromiseState
    param: Value
    tags: Tags
    timeout_at: int
    created_at: int
    value: Value = EMPTY_VALUE
    settled_at: int | None = None
    callbacks: tuple[str, ...] = ()  # awaiter promise ids, in registration order
    listeners: tuple[str, ...] = ()  # addresses, in registration order

    def to_record(self) -> PromiseRecord:
        return PromiseRecord(
            id=self.id,
            state=self.state,
            param=self.param,
            value=self.value,
            tags=self.tags,
            timeout_at=self.timeout_at,
            created_at=self.created_at,
            settled_at=self.settled_at,
        )

    @property
    def is_timer(self) -> bool:
        return is_timer(self.tags)

    @property
    def external(self) -> bool:
        """Promises the machine arms a timeout for: targeted ones and timers."""
        return TARGET in self.tags or self.is_timer

    def add_callback(self, awaiter_id: str) -> PromiseObject:
        if awaiter_id in self.callbacks:
            return self
        return replace(self, callbacks=(*self.callbacks, awaiter_id))

    def add_listener(self, address: str) -> PromiseObject:
        if address in self.listeners:
            return self
        return replace(self, listeners=(*self.listeners, address))


def projected(p: PromiseObject) -> PromiseObject:
    """A pending promise past its deadline as reads show it (Lean repeats this inline).

    Only ``state`` and ``settledAt`` change; the ledgers and the value stay as stored.
    """
    state = PromiseState.RESOLVED if p.is_timer else PromiseState.REJECTED_TIMEDOUT
    return replace(p, state=state, settled_at=p.timeout_at)


def target_of(p: PromiseObject) -> str:
    """Lean's ``(p.tags.get? "resonate:target").getD ""``."""
    return p.tags.get(TARGET, "")


@dataclass(frozen=True)
class TaskObject:
    id: str
    state: TaskState
    version: int
    ttl: int | None = None
    pid: str | None = None
    resumes: tuple[str, ...] = ()  # awaited promise ids, in arrival order

    def to_record(self) -> TaskRecord:
        return TaskRecord(
            id=self.id,
            state=self.state,
            version=self.version,
            resumes=len(self.resumes),
            ttl=self.ttl,
            pid=self.pid,
        )


@dataclass(frozen=True)
class PromiseTimeout:
    id: str
    timeout: int


@dataclass(frozen=True)
class TaskTimeout:
    id: str
    kind: int  # RETRY or LEASE
    timeout: int


@dataclass(frozen=True)
class ScheduleTimeout:
    id: str
    timeout: int


# Lean's ``Message`` is the wire's: ``.execute t.id t.version`` is ``execute_message(t.id,
# t.version)`` and ``.unblock p.toRecord`` is ``unblock_message(p.to_record())``, the record
# as it was when the message was enqueued.


@dataclass(frozen=True)
class OutboxEntry:
    address: str
    message: Message

    @property
    def key(self) -> str:
        """Lean's ``OutboxEntry.key``: one execute per task, one unblock per (promise, address)."""
        if isinstance(self.message, Execute):
            return self.message.data.task.id
        return f"{self.message.data.promise.id}:notify:{self.address}"


@dataclass
class MachineConfig:
    """Lean's ``ServerConfig``: the machine's one parameter (not ``troth serve``'s settings)."""

    retry_timeout: int = 5000


@dataclass
class ServerState:
    """The whole machine, with Lean's effects as methods (upsert = filter out, then prepend)."""

    config: MachineConfig = field(default_factory=MachineConfig)
    promises: list[PromiseObject] = field(default_factory=list)
    tasks: list[TaskObject] = field(default_factory=list)
    schedules: list[Schedule] = field(default_factory=list)
    promise_timeouts: list[PromiseTimeout] = field(default_factory=list)
    task_timeouts: list[TaskTimeout] = field(default_factory=list)
    schedule_timeouts: list[ScheduleTimeout] = field(default_factory=list)
    outbox: list[OutboxEntry] = field(default_factory=list)

    # -- objects ---------------------------------------------------------------------------

    def get_promise(self, id: str) -> PromiseObject | None:
        return next((p for p in self.promises if p.id == id), None)

    def set_promise(self, p: PromiseObject) -> None:
        self.promises = [p, *(q for q in self.promises if q.id != p.id)]

    def get_task(self, id: str) -> TaskObject | None:
        return next((t for t in self.tasks if t.id == id), None)

    def set_task(self, t: TaskObject) -> None:
        self.tasks = [t, *(u for u in self.tasks if u.id != t.id)]

    def get_schedule(self, id: str) -> Schedule | None:
        return next((s for s in self.schedules if s.id == id), None)

    def set_schedule(self, sch: Schedule) -> None:
        self.schedules = [sch, *(s for s in self.schedules if s.id != sch.id)]

    def del_schedule(self, id: str) -> None:
        self.schedules = [s for s in self.schedules if s.id != id]

    # -- timeouts --------------------------------------------------------------------------

    def set_promise_timeout(self, id: str, timeout: int) -> None:
        rest = [t for t in self.promise_timeouts if t.id != id]
        self.promise_timeouts = [PromiseTimeout(id, timeout), *rest]

    def del_promise_timeout(self, id: str) -> None:
        self.promise_timeouts = [t for t in self.promise_timeouts if t.id != id]

    def set_task_timeout(self, id: str, kind: int, timeout: int) -> None:
        """Upsert by (id, kind): arming a retry leaves a lease row of the same task in place."""
        rest = [t for t in self.task_timeouts if not (t.id == id and t.kind == kind)]
        self.task_timeouts = [TaskTimeout(id, kind, timeout), *rest]

    def del_task_timeout(self, id: str) -> None:
        """Removes both kinds."""
        self.task_timeouts = [t for t in self.task_timeouts if t.id != id]

    def set_schedule_timeout(self, id: str, timeout: int) -> None:
        rest = [t for t in self.schedule_timeouts if t.id != id]
        self.schedule_timeouts = [ScheduleTimeout(id, timeout), *rest]

    def del_schedule_timeout(self, id: str) -> None:
        self.schedule_timeouts = [t for t in self.schedule_timeouts if t.id != id]

    # -- outbox ----------------------------------------------------------------------------

    def set_message(self, address: str, message: Message) -> None:
        entry = OutboxEntry(address, message)
        key = entry.key
        self.outbox = [entry, *(e for e in self.outbox if e.key != key)]
