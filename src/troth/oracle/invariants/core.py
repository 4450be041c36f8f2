"""What every check of the property catalogue shares, and nothing else.

The snapshot read once into a ``View``, the ``Step`` a transition check judges, the two
registries the checks enter themselves in (``state_property``, ``step_property``), the
predicates on a promise the checks speak in (``settled``, ``live``, ``targeted``, ...), and
the few helpers that checks of more than one object use. It imports no check: every
object's module imports it and none imports another, so the checks of one object read on
their own. (The underscored helpers are the checks' own; nothing outside this package uses
them.)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from troth.protocol.messages import ExecuteData
from troth.protocol.records import (
    TARGET,
    PromiseRecord,
    PromiseState,
    Schedule,
    TaskRecord,
    Value,
    timed_out_state,
)
from troth.protocol.responses import OutboxEntry, Snapshot

RETRY = 0  # taskTimeouts type of a pending task's retry (HEAD's retryAt)
LEASE = 1  # taskTimeouts type of an acquired task's lease (HEAD's expiresAt)

PENDING = PromiseState.PENDING


class Violation(NamedTuple):
    name: str
    ids: tuple[str, ...]
    detail: str


# -- reading a snapshot ---------------------------------------------------------------------

MessageKey = tuple[str, ...]


def message_key(entry: OutboxEntry) -> MessageKey:
    """Lean's outbox key: one execute per task, one unblock per (promise, address)."""
    data = entry.message.data
    if isinstance(data, ExecuteData):
        return ("execute", data.task.id)
    return ("unblock", data.promise.id, entry.address)


class View:
    """A snapshot indexed by id, built once and shared by every check."""

    def __init__(self, snap: Snapshot) -> None:
        self.snap = snap
        self.promises: dict[str, PromiseRecord] = {p.id: p for p in snap.promises}
        self.tasks: dict[str, TaskRecord] = {t.id: t for t in snap.tasks}
        self.schedules: dict[str, Schedule] = {s.id: s for s in snap.schedules}
        self.callbacks: dict[str, set[str]] = {}  # awaited -> awaiters
        self.awaited_by: dict[str, set[str]] = {}  # awaiter -> the promises holding it
        for c in snap.callbacks:
            self.callbacks.setdefault(c.awaited, set()).add(c.awaiter)
            self.awaited_by.setdefault(c.awaiter, set()).add(c.awaited)
        self.listeners: dict[str, set[str]] = {}
        for entry in snap.listeners:
            self.listeners.setdefault(entry.id, set()).add(entry.address)
        self.promise_timeouts = {t.id: t.timeout for t in snap.promise_timeouts}
        self.retry = {t.id: t.timeout for t in snap.task_timeouts if t.type == RETRY}
        self.lease = {t.id: t.timeout for t in snap.task_timeouts if t.type == LEASE}
        self.schedule_timeouts = {t.id: t.timeout for t in snap.schedule_timeouts}
        self.messages: dict[MessageKey, OutboxEntry] = {message_key(m): m for m in snap.messages}

    def promise_facts(self, id: str) -> tuple[object, ...] | None:
        """Everything the snapshot says about one promise, to tell which ones a step touched."""
        p = self.promises.get(id)
        if p is None:
            return None
        return (p, self.callbacks.get(id), self.listeners.get(id), self.promise_timeouts.get(id))

    def task_facts(self, id: str) -> tuple[object, ...] | None:
        t = self.tasks.get(id)
        if t is None:
            return None
        return (t, self.retry.get(id), self.lease.get(id))


def empty(value: Value) -> bool:
    """Lean's ``{}``: no headers, no data."""
    return not value.headers and value.data is None


def settled(p: PromiseRecord) -> bool:
    return p.state != PENDING


def live(p: PromiseRecord, now: int) -> bool:
    """Projected pending: the deadline is exclusive, so at ``timeoutAt`` it is already dead."""
    return p.state == PENDING and p.timeout_at > now


def targeted(p: PromiseRecord) -> bool:
    return TARGET in p.tags


def external(p: PromiseRecord) -> bool:
    """Lean's ``PromiseObject.external``: targeted or a timer (83d64c3 has no external tag)."""
    return targeted(p) or p.tags.get("resonate:timer") == "true"


def at_deadline_verdict(p: PromiseRecord) -> bool:
    return p.settled_at == p.timeout_at and p.state == timed_out_state(p.tags)


# -- registration ---------------------------------------------------------------------------

Finding = tuple[tuple[str, ...], str]  # (ids, detail), named by the check that yields it
StateCheck = Callable[[View, int], Iterable[Finding]]


@dataclass(frozen=True)
class Step:
    """One step as the transition checks see it."""

    before: View
    after: View
    now: int
    outbox_retained: bool
    retry_timeout: int
    promise_ids: frozenset[str]  # promises the step created, changed or removed
    task_ids: frozenset[str]  # likewise for tasks (records and timeout rows)


StepCheck = Callable[[Step], Iterable[Finding]]

STATE_PROPERTIES: dict[str, StateCheck] = {}
STEP_PROPERTIES: dict[str, StepCheck] = {}


def state_property(check: StateCheck) -> StateCheck:
    STATE_PROPERTIES[check.__name__] = check
    return check


def step_property(check: StepCheck) -> StepCheck:
    STEP_PROPERTIES[check.__name__] = check
    return check


# A step's snapshots are judged twice (as `after`, then as the next step's `before`); keep the
# last few views, holding their snapshots so an id() cannot be reused while cached.
_views: dict[int, tuple[Snapshot, View]] = {}


def view(snap: Snapshot) -> View:
    cached = _views.get(id(snap))
    if cached is not None and cached[0] is snap:
        return cached[1]
    v = View(snap)
    if len(_views) >= 4:
        del _views[next(iter(_views))]
    _views[id(snap)] = (snap, v)
    return v


# -- helpers the checks of more than one object share --------------------------------------


def _duplicates(keys: Iterable[tuple[str, ...]], what: str) -> Iterator[Finding]:
    for key, n in Counter(keys).items():
        if n > 1:
            yield key, f"{n} {what} rows share this key"


def _promise_pairs(s: Step) -> Iterator[tuple[PromiseRecord, PromiseRecord]]:
    """(before, after) of each touched promise that exists on both sides."""
    for id in s.promise_ids:
        b, a = s.before.promises.get(id), s.after.promises.get(id)
        if b is not None and a is not None:
            yield b, a


def _new_promises(s: Step) -> Iterator[PromiseRecord]:
    for id in s.promise_ids:
        if id not in s.before.promises and id in s.after.promises:
            yield s.after.promises[id]


def _ledger(v: View, ledger: str, id: str) -> set[str]:
    return getattr(v, ledger).get(id, set())
