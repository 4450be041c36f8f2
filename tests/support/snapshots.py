"""Snapshots for tests: decoded from a ``debug.snap`` response, or built by hand.

``from_wire`` turns the JSON ``data`` of a ``debug.snap`` into the typed ``Snapshot`` (msgspec
cannot decode the untagged execute/unblock union by itself). ``World`` builds a snapshot one
object at a time; each object comes with the timeout rows the 83d64c3 machine would hold
for it unless told otherwise, so a test states only the detail it is about.
"""

from __future__ import annotations

import copy
from typing import Any

import msgspec

from troth.protocol.messages import Message, execute_message, unblock_message
from troth.protocol.records import TARGET, PromiseRecord, Schedule, TaskRecord, Value, is_timer
from troth.protocol.responses import (
    CallbackEntry,
    ListenerEntry,
    OutboxEntry,
    PromiseTimeoutEntry,
    ScheduleTimeoutEntry,
    Snapshot,
    TaskTimeoutEntry,
    make_snapshot,
)

ADDRESS = "poll://any@g"
LISTENER = "poll://uni@g/l1"
RETRY_TIMEOUT = 5000


# -- decoding ---------------------------------------------------------------------------------


def from_wire(data: dict[str, Any]) -> Snapshot:
    """The typed snapshot of a ``debug.snap`` response's ``data``."""

    def rows(key: str, kind: type) -> Any:
        return msgspec.convert(data.get(key, []), list[kind])

    return Snapshot(
        promises=rows("promises", PromiseRecord),
        promise_timeouts=rows("promiseTimeouts", PromiseTimeoutEntry),
        callbacks=rows("callbacks", CallbackEntry),
        listeners=rows("listeners", ListenerEntry),
        tasks=rows("tasks", TaskRecord),
        task_timeouts=rows("taskTimeouts", TaskTimeoutEntry),
        messages=[
            OutboxEntry(m["address"], msgspec.convert(m["message"], Message))
            for m in data["messages"]
        ],
        schedules=rows("schedules", Schedule),
        schedule_timeouts=rows("scheduleTimeouts", ScheduleTimeoutEntry),
    )


# -- building -------------------------------------------------------------------------------


class World:
    """A machine state under construction; ``snap()`` freezes it.

    Defaults describe a plausible 83d64c3 state at ``now`` around 1000: promises are born at
    0 with deadline 10000, targeted at ``ADDRESS``; pending external promises are armed;
    pending tasks hold a retry row, acquired ones a lease row.
    """

    def __init__(self) -> None:
        self.promises: dict[str, PromiseRecord] = {}
        self.promise_timeouts: dict[str, int] = {}
        self.callbacks: set[tuple[str, str]] = set()  # (awaited, awaiter)
        self.listeners: set[tuple[str, str]] = set()  # (id, address)
        self.tasks: dict[str, TaskRecord] = {}
        self.task_timeouts: dict[tuple[str, int], int] = {}
        self.messages: dict[tuple[str, ...], OutboxEntry] = {}
        self.schedules: dict[str, Schedule] = {}
        self.schedule_timeouts: dict[str, int] = {}

    def copy(self) -> World:
        return copy.deepcopy(self)

    def promise(
        self,
        id: str,
        state: str = "pending",
        *,
        tags: dict[str, str] | None = None,
        timeout_at: int = 10_000,
        created_at: int = 0,
        settled_at: int | None = None,
        value: Value | None = None,
        param: Value | None = None,
        armed: bool | None = None,
    ) -> World:
        """A promise; settled states default to a client settlement at 500."""
        tags = {TARGET: ADDRESS} if tags is None else tags
        if settled_at is None and state != "pending":
            settled_at = timeout_at if state == "rejected_timedout" else 500
        self.promises[id] = PromiseRecord(
            id=id,
            state=state,  # type: ignore[arg-type]
            param=param or Value(),
            value=value or Value(),
            tags=tags,
            timeout_at=timeout_at,
            created_at=created_at,
            settled_at=settled_at,
        )
        external = TARGET in tags or is_timer(tags)
        self.promise_timeouts.pop(id, None)
        if armed if armed is not None else state == "pending" and external:
            self.promise_timeouts[id] = timeout_at
        return self

    def promise_with(self, id: str, **fields: Any) -> World:
        """Change some fields of a promise's record, nothing else."""
        self.promises[id] = msgspec.structs.replace(self.promises[id], **fields)
        return self

    def task(
        self,
        id: str,
        state: str = "pending",
        version: int | None = None,
        *,
        pid: str | None = None,
        ttl: int | None = None,
        resumes: int = 0,
        retry: int | None = None,
        lease: int | None = None,
    ) -> World:
        """A task with the timeout row its state calls for (retry 6000, lease 2000)."""
        acquired = state == "acquired"
        if version is None:
            version = 1 if acquired else 0
        self.tasks[id] = TaskRecord(
            id=id,
            state=state,  # type: ignore[arg-type]
            version=version,
            resumes=resumes,
            ttl=ttl if ttl is not None or not acquired else 1000,
            pid=pid if pid is not None or not acquired else "w1",
        )
        self.task_timeouts.pop((id, 0), None)
        self.task_timeouts.pop((id, 1), None)
        if state == "pending" or retry is not None:
            self.task_timeouts[(id, 0)] = 6000 if retry is None else retry
        if acquired or lease is not None:
            self.task_timeouts[(id, 1)] = 2000 if lease is None else lease
        return self

    def task_with(self, id: str, **fields: Any) -> World:
        """Change some fields of a task's record, nothing else."""
        self.tasks[id] = msgspec.structs.replace(self.tasks[id], **fields)
        return self

    def drop_timeout(self, id: str, type: int) -> World:
        del self.task_timeouts[(id, type)]
        return self

    def callback(self, awaited: str, awaiter: str) -> World:
        self.callbacks.add((awaited, awaiter))
        return self

    def uncallback(self, awaited: str, awaiter: str) -> World:
        self.callbacks.discard((awaited, awaiter))
        return self

    def listener(self, id: str, address: str = LISTENER) -> World:
        self.listeners.add((id, address))
        return self

    def unlisten(self, id: str, address: str = LISTENER) -> World:
        self.listeners.discard((id, address))
        return self

    def execute(self, id: str, version: int | None = None, address: str | None = None) -> World:
        """An execute for ``id``'s task, by default at its version and to its target."""
        if version is None:
            version = self.tasks[id].version
        if address is None:
            address = self.promises[id].tags.get(TARGET, "")
        self.messages[("execute", id)] = OutboxEntry(address, execute_message(id, version))
        return self

    def unblock(
        self, id: str, address: str = LISTENER, record: PromiseRecord | None = None
    ) -> World:
        """An unblock carrying ``id``'s current record (or the one given)."""
        entry = OutboxEntry(address, unblock_message(record or self.promises[id]))
        self.messages[("unblock", id, address)] = entry
        return self

    def unsend(self, *key: str) -> World:
        del self.messages[key]
        return self

    def schedule(
        self,
        id: str,
        *,
        created_at: int = 0,
        next_run_at: int = 2000,
        last_run_at: int | None = None,
        cron: str = "*/2 * * * * *",
        promise_timeout: int = 1000,
    ) -> World:
        self.schedules[id] = Schedule(
            id=id,
            cron=cron,
            promise_id="{{.id}}.{{.timestamp}}",
            promise_timeout=promise_timeout,
            promise_param=Value(),
            promise_tags={TARGET: ADDRESS},
            created_at=created_at,
            next_run_at=next_run_at,
            last_run_at=last_run_at,
        )
        self.schedule_timeouts[id] = next_run_at
        return self

    def snap(self) -> Snapshot:
        return make_snapshot(
            promises=list(self.promises.values()),
            promise_timeouts=[PromiseTimeoutEntry(i, t) for i, t in self.promise_timeouts.items()],
            callbacks=[CallbackEntry(awaiter=w, awaited=p) for p, w in self.callbacks],
            listeners=[ListenerEntry(id=i, address=a) for i, a in self.listeners],
            tasks=list(self.tasks.values()),
            task_timeouts=[TaskTimeoutEntry(i, k, t) for (i, k), t in self.task_timeouts.items()],
            messages=list(self.messages.values()),
            schedules=list(self.schedules.values()),
            schedule_timeouts=[
                ScheduleTimeoutEntry(i, t) for i, t in self.schedule_timeouts.items()
            ],
        )
