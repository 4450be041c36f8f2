"""The property catalogue, checked against ``debug.snap`` snapshots.

``check_state(snap, now)`` judges one state; ``check_step(before, after, now)`` judges one
step (a request, or a whole ``debug.tick``). Both answer the violated properties by their
catalogue names (docs/references.md#the-property-catalogue), so a report reads the same
here as in the Lean, Go and TypeScript checkers. The checker reads only the wire snapshot,
so it judges the oracle and the server alike.

The catalogue is written for HEAD's machine; troth runs 83d64c3 behind its 400 doors
(docs/semantics.md). The store is read through the catalogue's mapping: a task's
``expiresAt`` is its lease row (``taskTimeouts`` type 1) and ``retryAt`` its retry row
(type 0). The ✓E entries hold because ``debug.tick`` fires a timeout only once it is due. A
tick may run several internal transitions in one step; every property below also holds for
such a composition (where that needed a word, the check says so).

State properties implemented: every ✓ and ✓E entry, and the ✗door entries the doors
close: 5, 6, 10 (settle to ``pending`` or ``rejected_timedout`` is refused), 14 (self-await
is refused at register_callback and task.suspend), 35 and 37 (an untargeted task.create is
refused), 38 and 43 (listener addresses are validated), 44 (settle to ``pending``), 45
(an empty suspend is refused).

State properties excluded:

- 9 ``well_formed_promise_timer_not_targeted`` and 27
  ``well_formed_schedule_promise_tags_not_timer_targeted``: troth accepts timer+target, as
  83d64c3 does (the timer decides the verdict).
- 13 ``well_formed_promise_obligations_require_external``: callbacks, listeners and
  suspensions on internal promises are accepted, as in 83d64c3 (their awaiters strand).
- 25 ``well_formed_task_resumes_unique``: the snapshot shows ``resumes`` as a count.

Transition properties implemented: every ✓ and ✓E entry, and the ✗door entries 9,
10, 22, 28, 42 and 43 (closed by the settle doors and the targeted task.create door).
Three are weaker than the catalogue's because ``resumes`` is a count: 24 and 26 ask for a
non-empty ``resumes`` rather than the awaited id in it, and 38 asks the count to grow or
drop to zero. Three depend on the outbox keeping what it holds, which the oracle does and
the server does not (delivery removes messages): 25, 29 and the message half of
``eager_pending_entry_arms_retry``; ``outbox_retained=False`` turns them off.

Transition properties excluded:

- 12 ``monotone_promise_callbacks_grow_while_pending`` and 23
  ``consistent_obligation_discharge_requires_settled``: 83d64c3's settlement scrub removes
  the settling promise from the callbacks of other, still pending promises.
  ``consistent_obligation_discharge_requires_settlement_or_scrub`` checks what does hold.
- 27 ``consistent_suspension_registers_callback``: false for HEAD's machine too (a known
  defect: a suspension may add no new callback); state property 45 checks the sound form.
- 40 ``preserved_no_dead_dispatch`` and 41 ``preserved_execute_only_for_live_task``: 83d64c3
  re-pends and dispatches dead tasks (lease and retry expiry, task.continue, resume of a dead
  awaiter, a schedule's backlogged occurrences).
- 47 ``consistent_task_pending_entry_arms_retry`` and 50 ``consistent_task_wake_records_resume``:
  83d64c3 dispatches eagerly (retry at ``now + retryTimeout`` plus an execute) where HEAD
  sets ``retryAt = now``. ``eager_pending_entry_arms_retry`` checks 83d64c3's form, and the
  rest of 50 (version kept, resume recorded) is in 5 and 26.

Prose invariants (the DAA pages') that hold are either the catalogue entry that restates them
(``PROSE_NAMES``) or, where the catalogue has no image because HEAD has no timer tables,
checked here under their own names: ``missing_ptimeout`` (in its corrected form: every
pending *external* promise is armed, at its ``timeoutAt``), ``arming_is_external_only``,
``stale_ptimeout``, ``listener_for_settled_promise``. troth adds the same for the other
tables (``stale_ttimeout``, ``schedule_timeout_matches_next_run_at``) and
``callback_for_settled_promise`` (83d64c3 drains both ledgers at settlement; it implies the
prose ``suspended_with_consumed_callbacks``). ``missing_ptimeout`` as worded (every pending
promise armed) is false by design and not checked.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from troth.protocol import addresses
from troth.protocol.messages import ExecuteData, UnblockData
from troth.protocol.records import (
    TARGET,
    PromiseRecord,
    PromiseState,
    Schedule,
    TaskRecord,
    TaskState,
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


# The prose invariants that a catalogue entry restates (or strengthens).
PROSE_NAMES: dict[str, str] = {
    "orphan_invokes": "consistent_task_iff_targeted_promise",
    "orphan_tasks": "consistent_task_iff_targeted_promise",
    "timedout_settled_at_mismatch": "well_formed_promise_timedout_is_server_owned",
    "pending_task_no_ttimeout": "well_formed_task_pending_iff_has_retry_at",
    "acquired_task_no_lease": "well_formed_task_acquired_iff_has_expires_at",
    "suspended_no_callback": "consistent_suspended_task_holds_rung",
    "suspended_task_has_ttimeout": "well_formed_task_suspended_is_cleared",
    "fulfilled_task_has_ttimeout": "well_formed_task_fulfilled_is_cleared",
    "callback_awaiter_no_target": "consistent_callback_awaiter_is_targeted",
    "suspended_with_consumed_callbacks": "callback_for_settled_promise",
}


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


def check_state(snap: Snapshot, now: int) -> list[Violation]:
    """Every state property that fails in ``snap`` at instant ``now``."""
    v = view(snap)
    return [
        Violation(name, ids, detail)
        for name, check in STATE_PROPERTIES.items()
        for ids, detail in check(v, now)
    ]


def check_step(
    before: Snapshot,
    after: Snapshot,
    now: int,
    *,
    outbox_retained: bool = True,
    retry_timeout: int = 5000,
) -> list[Violation]:
    """Every transition property the step ``before -> after`` at ``now`` breaks.

    ``outbox_retained=False`` is for servers that delete delivered messages: the checks that
    expect a message to stay in the outbox are skipped. ``retry_timeout`` is the server's.
    """
    b, a = view(before), view(after)
    step = Step(
        b,
        a,
        now,
        outbox_retained,
        retry_timeout,
        frozenset(
            i for i in b.promises.keys() | a.promises if b.promise_facts(i) != a.promise_facts(i)
        ),
        frozenset(i for i in b.tasks.keys() | a.tasks if b.task_facts(i) != a.task_facts(i)),
    )
    return [
        Violation(name, ids, detail)
        for name, check in STEP_PROPERTIES.items()
        for ids, detail in check(step)
    ]


# -- state properties: promises -----------------------------------------------------------


@state_property
def well_formed_promise_created_at_lte_timeout_at(v: View, now: int) -> Iterator[Finding]:
    for p in v.promises.values():
        if p.created_at > p.timeout_at:
            yield (p.id,), f"createdAt {p.created_at} > timeoutAt {p.timeout_at}"


@state_property
def well_formed_promise_pending_created_before_deadline(v: View, now: int) -> Iterator[Finding]:
    for p in v.promises.values():
        if p.state == PENDING and p.created_at >= p.timeout_at:
            yield (p.id,), f"pending with createdAt {p.created_at} >= timeoutAt {p.timeout_at}"


@state_property
def well_formed_promise_settled_at_lte_timeout_at(v: View, now: int) -> Iterator[Finding]:
    for p in v.promises.values():
        if p.settled_at is not None and p.settled_at > p.timeout_at:
            yield (p.id,), f"settledAt {p.settled_at} > timeoutAt {p.timeout_at}"


@state_property
def well_formed_promise_created_at_lte_settled_at(v: View, now: int) -> Iterator[Finding]:
    for p in v.promises.values():
        if p.settled_at is not None and p.created_at > p.settled_at:
            yield (p.id,), f"createdAt {p.created_at} > settledAt {p.settled_at}"


@state_property
def well_formed_promise_settled_at_iff_not_pending(v: View, now: int) -> Iterator[Finding]:
    for p in v.promises.values():
        if (p.settled_at is not None) != settled(p):
            yield (p.id,), f"state {p.state} with settledAt {p.settled_at}"


@state_property
def well_formed_promise_pending_has_no_value(v: View, now: int) -> Iterator[Finding]:
    for p in v.promises.values():
        if p.state == PENDING and not empty(p.value):
            yield (p.id,), f"pending with value {p.value}"


@state_property
def well_formed_promise_deadline_verdict_matches_timer_tag(v: View, now: int) -> Iterator[Finding]:
    for p in v.promises.values():
        if settled(p) and p.settled_at == p.timeout_at and not at_deadline_verdict(p):
            yield (p.id,), f"settled at its deadline as {p.state}, tags {p.tags}"


@state_property
def well_formed_promise_deadline_settlement_has_no_value(v: View, now: int) -> Iterator[Finding]:
    for p in v.promises.values():
        if settled(p) and p.settled_at == p.timeout_at and not empty(p.value):
            yield (p.id,), f"settled at its deadline with value {p.value}"


@state_property
def well_formed_promise_timedout_is_server_owned(v: View, now: int) -> Iterator[Finding]:
    for p in v.promises.values():
        if p.state == PromiseState.REJECTED_TIMEDOUT and p.settled_at != p.timeout_at:
            yield (p.id,), f"rejected_timedout at {p.settled_at}, deadline {p.timeout_at}"


@state_property
def well_formed_promise_callbacks_unique(v: View, now: int) -> Iterator[Finding]:
    counts = Counter((c.awaited, c.awaiter) for c in v.snap.callbacks)
    for (awaited, awaiter), n in counts.items():
        if n > 1:
            yield (awaited, awaiter), f"{awaiter} registered {n} times"


@state_property
def well_formed_promise_listeners_unique(v: View, now: int) -> Iterator[Finding]:
    counts = Counter((entry.id, entry.address) for entry in v.snap.listeners)
    for (id, address), n in counts.items():
        if n > 1:
            yield (id,), f"listener {address} registered {n} times"


@state_property
def well_formed_promise_awaiter_is_not_self(v: View, now: int) -> Iterator[Finding]:
    for awaited, awaiters in v.callbacks.items():
        if awaited in awaiters:
            yield (awaited,), "the promise awaits itself"


@state_property
def well_formed_promise_created_at_lte_now(v: View, now: int) -> Iterator[Finding]:
    for p in v.promises.values():
        if p.created_at > now:
            yield (p.id,), f"createdAt {p.created_at} > now {now}"


@state_property
def well_formed_promise_settled_at_lte_now(v: View, now: int) -> Iterator[Finding]:
    for p in v.promises.values():
        if p.settled_at is not None and p.settled_at > now:
            yield (p.id,), f"settledAt {p.settled_at} > now {now}"


# -- state properties: tasks --------------------------------------------------------------


def _iff(v: View, what: str, has: Callable[[TaskRecord], bool], state: TaskState):
    for t in v.tasks.values():
        if has(t) != (t.state == state):
            yield (t.id,), f"{t.state} task {'with' if has(t) else 'without'} {what}"


@state_property
def well_formed_task_acquired_iff_has_pid(v: View, now: int) -> Iterator[Finding]:
    yield from _iff(v, "pid", lambda t: t.pid is not None, TaskState.ACQUIRED)


@state_property
def well_formed_task_acquired_iff_has_ttl(v: View, now: int) -> Iterator[Finding]:
    yield from _iff(v, "ttl", lambda t: t.ttl is not None, TaskState.ACQUIRED)


@state_property
def well_formed_task_acquired_iff_has_expires_at(v: View, now: int) -> Iterator[Finding]:
    yield from _iff(v, "a lease timeout", lambda t: t.id in v.lease, TaskState.ACQUIRED)


@state_property
def well_formed_task_pending_iff_has_retry_at(v: View, now: int) -> Iterator[Finding]:
    yield from _iff(v, "a retry timeout", lambda t: t.id in v.retry, TaskState.PENDING)


def _uncleared(v: View, t: TaskRecord) -> list[str]:
    """What a task out of work still holds: pid, ttl, timeouts."""
    held = [name for name, value in (("pid", t.pid), ("ttl", t.ttl)) if value is not None]
    held += [name for name, rows in (("retry", v.retry), ("lease", v.lease)) if t.id in rows]
    return held


def _cleared(v: View, state: TaskState) -> Iterator[Finding]:
    for t in v.tasks.values():
        if t.state == state and (held := _uncleared(v, t)):
            yield (t.id,), f"{state} task holds {', '.join(held)}"


@state_property
def well_formed_task_fulfilled_is_cleared(v: View, now: int) -> Iterator[Finding]:
    yield from _cleared(v, TaskState.FULFILLED)
    for t in v.tasks.values():
        if t.state == TaskState.FULFILLED and t.resumes:
            yield (t.id,), f"fulfilled task with {t.resumes} resumes"


@state_property
def well_formed_task_suspended_is_cleared(v: View, now: int) -> Iterator[Finding]:
    yield from _cleared(v, TaskState.SUSPENDED)


@state_property
def well_formed_task_halted_is_cleared(v: View, now: int) -> Iterator[Finding]:
    yield from _cleared(v, TaskState.HALTED)


@state_property
def well_formed_task_suspended_has_no_resumes(v: View, now: int) -> Iterator[Finding]:
    for t in v.tasks.values():
        if t.state == TaskState.SUSPENDED and t.resumes:
            yield (t.id,), f"suspended task with {t.resumes} resumes"


@state_property
def well_formed_task_acquired_version_positive(v: View, now: int) -> Iterator[Finding]:
    for t in v.tasks.values():
        if t.state == TaskState.ACQUIRED and t.version < 1:
            yield (t.id,), f"acquired at version {t.version}"


# -- state properties: schedules and the store --------------------------------------------


@state_property
def well_formed_schedule_created_at_lte_next_run_at(v: View, now: int) -> Iterator[Finding]:
    for s in v.schedules.values():
        if s.created_at > s.next_run_at:
            yield (s.id,), f"createdAt {s.created_at} > nextRunAt {s.next_run_at}"


@state_property
def well_formed_schedule_created_at_lte_last_run_at(v: View, now: int) -> Iterator[Finding]:
    for s in v.schedules.values():
        if s.last_run_at is not None and s.created_at > s.last_run_at:
            yield (s.id,), f"createdAt {s.created_at} > lastRunAt {s.last_run_at}"


@state_property
def well_formed_schedule_last_run_at_lt_next_run_at(v: View, now: int) -> Iterator[Finding]:
    for s in v.schedules.values():
        if s.last_run_at is not None and s.last_run_at >= s.next_run_at:
            yield (s.id,), f"lastRunAt {s.last_run_at} >= nextRunAt {s.next_run_at}"


def _duplicates(keys: Iterable[tuple[str, ...]], what: str) -> Iterator[Finding]:
    for key, n in Counter(keys).items():
        if n > 1:
            yield key, f"{n} {what} rows share this key"


@state_property
def well_formed_store_promise_ids_unique(v: View, now: int) -> Iterator[Finding]:
    yield from _duplicates(((p.id,) for p in v.snap.promises), "promise")


@state_property
def well_formed_store_task_ids_unique(v: View, now: int) -> Iterator[Finding]:
    yield from _duplicates(((t.id,) for t in v.snap.tasks), "task")


@state_property
def well_formed_store_schedule_ids_unique(v: View, now: int) -> Iterator[Finding]:
    yield from _duplicates(((s.id,) for s in v.snap.schedules), "schedule")


@state_property
def well_formed_store_outbox_keys_unique(v: View, now: int) -> Iterator[Finding]:
    yield from _duplicates((message_key(m) for m in v.snap.messages), "outbox")


# -- state properties: consistency across objects -----------------------------------------


@state_property
def consistent_task_iff_targeted_promise(v: View, now: int) -> Iterator[Finding]:
    for t in v.tasks.values():
        p = v.promises.get(t.id)
        if p is None or not targeted(p):
            yield (t.id,), "task without a targeted promise" if p else "task without a promise"
    for p in v.promises.values():
        if targeted(p) and p.id not in v.tasks:
            yield (p.id,), "targeted promise without a task"


@state_property
def consistent_settled_promise_has_fulfilled_task(v: View, now: int) -> Iterator[Finding]:
    for p in v.promises.values():
        t = v.tasks.get(p.id)
        if settled(p) and t is not None and t.state != TaskState.FULFILLED:
            yield (p.id,), f"{p.state} promise with a {t.state} task"


@state_property
def consistent_callback_awaiter_is_targeted(v: View, now: int) -> Iterator[Finding]:
    for c in v.snap.callbacks:
        awaiter = v.promises.get(c.awaiter)
        if awaiter is None or not targeted(awaiter):
            why = "is untargeted" if awaiter else "does not exist"
            yield (c.awaited, c.awaiter), f"awaiter {c.awaiter} {why}"


@state_property
def consistent_listener_addresses_deliverable(v: View, now: int) -> Iterator[Finding]:
    for entry in v.snap.listeners:
        if not addresses.is_valid(entry.address):
            yield (entry.id,), f"listener address {entry.address!r} is not deliverable"


@state_property
def consistent_outbox_execute_names_existing_task(v: View, now: int) -> Iterator[Finding]:
    for m in v.snap.messages:
        data = m.message.data
        if isinstance(data, ExecuteData) and data.task.id not in v.tasks:
            yield (data.task.id,), "execute for a task that does not exist"


@state_property
def consistent_outbox_never_ahead(v: View, now: int) -> Iterator[Finding]:
    for m in v.snap.messages:
        data = m.message.data
        t = v.tasks.get(data.task.id) if isinstance(data, ExecuteData) else None
        if isinstance(data, ExecuteData) and t is not None and data.task.version > t.version:
            yield (t.id,), f"execute v{data.task.version} ahead of task v{t.version}"


@state_property
def consistent_outbox_execute_address_is_target_tag(v: View, now: int) -> Iterator[Finding]:
    for m in v.snap.messages:
        data = m.message.data
        p = v.promises.get(data.task.id) if isinstance(data, ExecuteData) else None
        if p is not None and m.address != p.tags.get(TARGET, ""):
            yield (p.id,), f"execute to {m.address!r}, target {p.tags.get(TARGET)!r}"


@state_property
def consistent_outbox_unblock_names_settled_promise(v: View, now: int) -> Iterator[Finding]:
    for m in v.snap.messages:
        data = m.message.data
        if not isinstance(data, UnblockData):
            continue
        stored = v.promises.get(data.promise.id)
        if not settled(data.promise) or stored is None or not settled(stored):
            yield (
                (data.promise.id,),
                f"unblock of a {data.promise.state} record, stored "
                + (f"{stored.state}" if stored else "absent"),
            )


@state_property
def consistent_outbox_unblock_address_deliverable(v: View, now: int) -> Iterator[Finding]:
    for m in v.snap.messages:
        data = m.message.data
        if isinstance(data, UnblockData) and not addresses.is_valid(m.address):
            yield (data.promise.id,), f"unblock to undeliverable address {m.address!r}"


@state_property
def consistent_settled_task_promise_settled(v: View, now: int) -> Iterator[Finding]:
    for t in v.tasks.values():
        p = v.promises.get(t.id)
        if t.state == TaskState.FULFILLED and p is not None and p.state == PENDING:
            yield (t.id,), "fulfilled task of a pending promise"


@state_property
def consistent_suspended_task_holds_rung(v: View, now: int) -> Iterator[Finding]:
    for t in v.tasks.values():
        p = v.promises.get(t.id)
        own_live = p is not None and live(p, now)
        if t.state == TaskState.SUSPENDED and own_live and not v.awaited_by.get(t.id):
            yield (t.id,), "suspended task of a live promise that no promise will resume"


# -- the 83d64c3 timer tables (the prose invariants, and the catalogue's mapping) -----------


@state_property
def missing_ptimeout(v: View, now: int) -> Iterator[Finding]:
    for p in v.promises.values():
        armed = v.promise_timeouts.get(p.id)
        if p.state == PENDING and external(p) and armed != p.timeout_at:
            yield (p.id,), f"pending external promise armed at {armed}, deadline {p.timeout_at}"


@state_property
def arming_is_external_only(v: View, now: int) -> Iterator[Finding]:
    for id in v.promise_timeouts:
        p = v.promises.get(id)
        if p is not None and not external(p):
            yield (id,), "promise timeout armed for an internal promise"


@state_property
def stale_ptimeout(v: View, now: int) -> Iterator[Finding]:
    for id in v.promise_timeouts:
        p = v.promises.get(id)
        if p is None or settled(p):
            yield (id,), f"promise timeout for a {p.state if p else 'missing'} promise"


@state_property
def stale_ttimeout(v: View, now: int) -> Iterator[Finding]:
    for row in v.snap.task_timeouts:
        if row.id not in v.tasks or row.type not in (RETRY, LEASE):
            yield (row.id,), f"task timeout of type {row.type} for an unknown task or kind"


@state_property
def schedule_timeout_matches_next_run_at(v: View, now: int) -> Iterator[Finding]:
    for s in v.schedules.values():
        if v.schedule_timeouts.get(s.id) != s.next_run_at:
            armed = v.schedule_timeouts.get(s.id)
            yield (s.id,), f"schedule timeout {armed}, nextRunAt {s.next_run_at}"
    for id in v.schedule_timeouts.keys() - v.schedules.keys():
        yield (id,), "schedule timeout for a schedule that does not exist"


@state_property
def listener_for_settled_promise(v: View, now: int) -> Iterator[Finding]:
    for id, held in v.listeners.items():
        p = v.promises.get(id)
        if p is None or settled(p):
            yield (id,), f"{len(held)} listeners on a {p.state if p else 'missing'} promise"


@state_property
def callback_for_settled_promise(v: View, now: int) -> Iterator[Finding]:
    for id, held in v.callbacks.items():
        p = v.promises.get(id)
        if p is None or settled(p):
            yield (id,), f"callbacks {sorted(held)} on a {p.state if p else 'missing'} promise"


# -- transition properties: promises ------------------------------------------------------


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


@step_property
def preserved_promise_birth_fields_immutable(s: Step) -> Iterator[Finding]:
    for b, a in _promise_pairs(s):
        for field in ("param", "tags", "timeout_at", "created_at"):
            if getattr(b, field) != getattr(a, field):
                yield (b.id,), f"{field} changed from {getattr(b, field)} to {getattr(a, field)}"


@step_property
def preserved_settled_promise_record(s: Step) -> Iterator[Finding]:
    for id in s.promise_ids:
        b, a = s.before.promises.get(id), s.after.promises.get(id)
        if b is None or not settled(b):
            continue
        if a is None:
            yield (id,), "settled promise deleted"
        elif (b.state, b.value, b.settled_at) != (a.state, a.value, a.settled_at):
            yield (id,), f"settled record changed: {b} -> {a}"


@step_property
def monotone_promise_set_grows(s: Step) -> Iterator[Finding]:
    for id in s.promise_ids:
        if id in s.before.promises and id not in s.after.promises:
            yield (id,), "promise deleted"


@step_property
def preserved_promise_state_frozen_once_settled(s: Step) -> Iterator[Finding]:
    for b, a in _promise_pairs(s):
        if settled(b) and a.state != b.state:
            yield (b.id,), f"settled state changed: {b.state} -> {a.state}"


@step_property
def preserved_promise_settlement_is_one_way(s: Step) -> Iterator[Finding]:
    for b, a in _promise_pairs(s):
        if settled(b) and a.state == PENDING:
            yield (b.id,), f"{b.state} promise became pending"


@step_property
def consistent_promise_settled_at_moves_with_state(s: Step) -> Iterator[Finding]:
    for b, a in _promise_pairs(s):
        if (b.settled_at != a.settled_at) != (b.state != a.state):
            yield (b.id,), f"{b.state}@{b.settled_at} -> {a.state}@{a.settled_at}"


@step_property
def preserved_promise_value_until_settlement(s: Step) -> Iterator[Finding]:
    for b, a in _promise_pairs(s):
        if b.state == PENDING and a.state == PENDING and b.value != a.value:
            yield (b.id,), f"pending value changed: {b.value} -> {a.value}"


@step_property
def preserved_promise_no_duplicate_ids(s: Step) -> Iterator[Finding]:
    yield from _duplicates(((p.id,) for p in s.after.snap.promises), "promise")


def _ledger(v: View, ledger: str, id: str) -> set[str]:
    return getattr(v, ledger).get(id, set())


def _ledger_change(s: Step, ledger: str, when_settled: bool) -> Iterator[Finding]:
    """Pending promises' ledgers only grow; settled promises' ledgers only shrink."""
    for id in s.promise_ids:
        a = s.after.promises.get(id)
        if a is None or settled(a) != when_settled:
            continue
        old, new = _ledger(s.before, ledger, id), _ledger(s.after, ledger, id)
        lost, gained = old - new, new - old
        if when_settled and gained:
            yield (id,), f"settled promise gained {ledger} {sorted(gained)}"
        if not when_settled and lost and id in s.before.promises:
            yield (id,), f"pending promise lost {ledger} {sorted(lost)}"


@step_property
def monotone_promise_callbacks_shrink_once_settled(s: Step) -> Iterator[Finding]:
    yield from _ledger_change(s, "callbacks", when_settled=True)


@step_property
def monotone_promise_listeners_grow_while_pending(s: Step) -> Iterator[Finding]:
    yield from _ledger_change(s, "listeners", when_settled=False)


@step_property
def monotone_promise_listeners_shrink_once_settled(s: Step) -> Iterator[Finding]:
    yield from _ledger_change(s, "listeners", when_settled=True)


@step_property
def consistent_promise_state_edge_admissible(s: Step) -> Iterator[Finding]:
    for b, a in _promise_pairs(s):
        if b.state != PENDING and a.state != b.state:
            yield (b.id,), f"inadmissible edge {b.state} -> {a.state}"


@step_property
def consistent_obligation_discharge_requires_settlement_or_scrub(s: Step) -> Iterator[Finding]:
    """83d64c3's form of 12 and 23: a ledger entry leaves only when its promise settles,
    or (the scrub) a callback leaves when its awaiter's own promise settles."""
    for id in s.promise_ids:
        a = s.after.promises.get(id)
        if a is None or settled(a):
            continue
        for address in _ledger(s.before, "listeners", id) - _ledger(s.after, "listeners", id):
            yield (id,), f"listener {address} removed from a pending promise"
        for awaiter in _ledger(s.before, "callbacks", id) - _ledger(s.after, "callbacks", id):
            w = s.after.promises.get(awaiter)
            if w is None or not settled(w):
                yield (id, awaiter), f"callback {awaiter} removed, and neither promise settled"


@step_property
def consistent_promise_settlement_stamp(s: Step) -> Iterator[Finding]:
    for b, a in _promise_pairs(s):
        if b.state != PENDING or a.state == PENDING:
            continue
        client = a.settled_at == s.now < a.timeout_at and a.state != PromiseState.REJECTED_TIMEDOUT
        deadline = at_deadline_verdict(a) and a.timeout_at <= s.now and a.value == b.value
        if not (client or deadline):
            yield (
                (a.id,),
                f"settled {a.state} at {a.settled_at}, now {s.now}, deadline " + str(a.timeout_at),
            )


@step_property
def preserved_timedout_is_server_owned(s: Step) -> Iterator[Finding]:
    for b, a in _promise_pairs(s):
        timed_out = b.state == PENDING and a.state == PromiseState.REJECTED_TIMEDOUT
        if timed_out and not (a.settled_at == a.timeout_at <= s.now):
            yield (a.id,), f"timed out at {a.settled_at}, deadline {a.timeout_at}, now {s.now}"


@step_property
def consistent_new_promise_born_clean(s: Step) -> Iterator[Finding]:
    """A new promise is a live birth or a dead one (``createdAt = settledAt = timeoutAt``).

    A tick may create a schedule's backlogged occurrence at its own past instant and time it
    out in the same step; such a promise is settled at its deadline with ``createdAt < now``.
    """
    for p in _new_promises(s):
        held = _ledger(s.after, "callbacks", p.id) | _ledger(s.after, "listeners", p.id)
        if held or not empty(p.value):
            yield (p.id,), f"born with obligations {sorted(held)} or value {p.value}"
        elif p.state == PENDING:
            if not p.created_at < p.timeout_at or p.created_at > s.now:
                yield (p.id,), f"live birth at {p.created_at}, deadline {p.timeout_at}"
        elif not at_deadline_verdict(p) or not (
            p.created_at == p.timeout_at or p.created_at < s.now
        ):
            yield (
                (p.id,),
                f"born {p.state} at {p.settled_at}, created {p.created_at}, "
                + (f"deadline {p.timeout_at}"),
            )


# -- transition properties: tasks ---------------------------------------------------------


def _task_pairs(s: Step) -> Iterator[tuple[TaskRecord, TaskRecord]]:
    for id in s.task_ids:
        b, a = s.before.tasks.get(id), s.after.tasks.get(id)
        if b is not None and a is not None:
            yield b, a


ACQUIRED, PENDING_T = TaskState.ACQUIRED, TaskState.PENDING
SUSPENDED, HALTED, FULFILLED = TaskState.SUSPENDED, TaskState.HALTED, TaskState.FULFILLED

# The 17 admissible task edges (transition property 17).
TASK_EDGES: dict[TaskState, frozenset[TaskState]] = {
    PENDING_T: frozenset({PENDING_T, ACQUIRED, HALTED, FULFILLED}),
    ACQUIRED: frozenset(TaskState),
    SUSPENDED: frozenset({PENDING_T, SUSPENDED, HALTED, FULFILLED}),
    HALTED: frozenset({PENDING_T, HALTED, FULFILLED}),
    FULFILLED: frozenset({FULFILLED}),
}


@step_property
def monotone_task_set_grows(s: Step) -> Iterator[Finding]:
    for id in s.task_ids:
        if id in s.before.tasks and id not in s.after.tasks:
            yield (id,), "task deleted"


@step_property
def monotone_task_version_increases_only_on_acquisition(s: Step) -> Iterator[Finding]:
    for b, a in _task_pairs(s):
        acquisition = b.state == PENDING_T and a.state == ACQUIRED
        expected = b.version + 1 if acquisition else b.version
        if a.version != expected:
            yield (b.id,), f"{b.state} v{b.version} -> {a.state} v{a.version}"


@step_property
def preserved_fulfilled_task(s: Step) -> Iterator[Finding]:
    for b, a in _task_pairs(s):
        if b.state != FULFILLED:
            continue
        held = _uncleared(s.after, a)
        if a.state != FULFILLED or a.version != b.version or held or a.resumes:
            yield (b.id,), f"fulfilled v{b.version} -> {a.state} v{a.version}, holds {held}"


@step_property
def consistent_task_state_edge_admissible(s: Step) -> Iterator[Finding]:
    for b, a in _task_pairs(s):
        if a.state not in TASK_EDGES[b.state]:
            yield (b.id,), f"inadmissible edge {b.state} -> {a.state}"


@step_property
def preserved_task_acquisition_only_from_pending(s: Step) -> Iterator[Finding]:
    for b, a in _task_pairs(s):
        if a.state == ACQUIRED and b.state not in (PENDING_T, ACQUIRED):
            yield (b.id,), f"acquired from {b.state}"


@step_property
def preserved_task_suspension_only_from_acquired(s: Step) -> Iterator[Finding]:
    for id in s.task_ids:
        a, b = s.after.tasks.get(id), s.before.tasks.get(id)
        entered = b is None or b.state not in (ACQUIRED, SUSPENDED)
        if a is not None and a.state == SUSPENDED and entered:
            yield (id,), f"suspended from {b.state if b else 'birth'}"


@step_property
def preserved_task_halted_only_reenters_via_pending(s: Step) -> Iterator[Finding]:
    for b, a in _task_pairs(s):
        if b.state == HALTED and a.state not in (HALTED, PENDING_T, FULFILLED):
            yield (b.id,), f"halted -> {a.state}"


@step_property
def consistent_settlement_fulfils_task(s: Step) -> Iterator[Finding]:
    for b, a in _promise_pairs(s):
        t = s.after.tasks.get(a.id)
        if b.state == PENDING and settled(a) and t is not None and t.state != FULFILLED:
            yield (a.id,), f"promise settled, task left {t.state}"


@step_property
def consistent_task_fulfilment_needs_settlement(s: Step) -> Iterator[Finding]:
    for b, a in _task_pairs(s):
        if b.state == FULFILLED or a.state != FULFILLED:
            continue
        pb, pa = s.before.promises.get(a.id), s.after.promises.get(a.id)
        if pb is None or pa is None or pb.state != PENDING or pa.state == PENDING:
            yield (a.id,), "task fulfilled without its promise settling in this step"


@step_property
def consistent_callback_consumption_resumes_awaiter(s: Step) -> Iterator[Finding]:
    """A consumed callback leaves its awaiter's task fulfilled or holding a resume.

    The snapshot shows ``resumes`` as a count, so which promise resumed it is not checked.
    """
    for id in s.promise_ids:
        for awaiter in _ledger(s.before, "callbacks", id) - _ledger(s.after, "callbacks", id):
            t = s.after.tasks.get(awaiter)
            if t is None or (t.state != FULFILLED and t.resumes == 0):
                state = f"{t.state} with no resumes" if t else "missing"
                yield (id, awaiter), f"callback consumed, awaiter's task {state}"


@step_property
def consistent_listener_consumption_enqueues_unblock(s: Step) -> Iterator[Finding]:
    if not s.outbox_retained:
        return
    for id in s.promise_ids:
        for address in _ledger(s.before, "listeners", id) - _ledger(s.after, "listeners", id):
            entry = s.after.messages.get(("unblock", id, address))
            if entry is None or not settled(entry.message.data.promise):  # type: ignore[union-attr]
                yield (id,), f"listener {address} removed without a settled unblock"


@step_property
def consistent_wake_follows_callback_consumption(s: Step) -> Iterator[Finding]:
    for b, a in _task_pairs(s):
        if b.state != SUSPENDED or a.state != PENDING_T:
            continue
        consumed = _ledger_owners(s.before, a.id) - _ledger_owners(s.after, a.id)
        if not consumed or a.resumes == 0:
            yield (a.id,), f"woken with {a.resumes} resumes, callbacks consumed {sorted(consumed)}"


def _ledger_owners(v: View, awaiter: str) -> set[str]:
    return v.awaited_by.get(awaiter, set())


@step_property
def consistent_task_birth_couples_promise_birth(s: Step) -> Iterator[Finding]:
    for id in s.task_ids:
        t = s.after.tasks.get(id)
        if t is None or id in s.before.tasks:
            continue
        p = s.after.promises.get(id)
        if p is None or id in s.before.promises or not targeted(p):
            yield (id,), "task born without a new targeted promise"
        elif not (
            (t.state == PENDING_T and t.version == 0 and p.state == PENDING)
            or (t.state == ACQUIRED and t.version >= 1 and p.state == PENDING)
            or (t.state == FULFILLED and t.version == 0 and settled(p))
        ):
            yield (id,), f"task born {t.state} v{t.version} with a {p.state} promise"
    for p in _new_promises(s):
        if targeted(p) and p.id not in s.after.tasks:
            yield (p.id,), "targeted promise born without a task"


@step_property
def consistent_task_birth_state(s: Step) -> Iterator[Finding]:
    for id in s.task_ids:
        t = s.after.tasks.get(id)
        if t is None or id in s.before.tasks:
            continue
        a = s.after
        ok = (
            (
                t.state == PENDING_T
                and id in a.retry
                and id not in a.lease
                and t.pid is None
                and t.ttl is None
                and t.resumes == 0
            )
            or (t.state == FULFILLED and not _uncleared(a, t) and t.resumes == 0)
            or (
                t.state == ACQUIRED
                and t.version >= 1
                and t.pid is not None
                and t.ttl is not None
                and id in a.lease
                and id not in a.retry
            )
        )
        if not ok:
            yield (id,), f"born {t}, retry {a.retry.get(id)}, lease {a.lease.get(id)}"


@step_property
def consistent_task_lease_released_atomically(s: Step) -> Iterator[Finding]:
    for b, a in _task_pairs(s):
        if b.state != ACQUIRED or a.state == ACQUIRED:
            continue
        if (
            a.pid is not None
            or a.ttl is not None
            or a.id in s.after.lease
            or a.version != b.version
        ):
            yield (a.id,), f"left acquired as {a}, lease {s.after.lease.get(a.id)}"


@step_property
def preserved_task_lease_holder_stable(s: Step) -> Iterator[Finding]:
    for b, a in _task_pairs(s):
        same_claim = b.state == a.state == ACQUIRED and b.version == a.version
        if same_claim and (b.pid, b.ttl) != (a.pid, a.ttl):
            yield (a.id,), f"lease holder changed: {b.pid}/{b.ttl} -> {a.pid}/{a.ttl}"


@step_property
def consistent_task_lease_fields_move_together(s: Step) -> Iterator[Finding]:
    """pid and ttl change only when a claim starts or ends; a heartbeat moves the lease alone."""
    for b, a in _task_pairs(s):
        claim_changed = (b.state == ACQUIRED) != (a.state == ACQUIRED) or b.version != a.version
        if (b.pid, b.ttl) != (a.pid, a.ttl) and not claim_changed:
            yield (a.id,), f"pid/ttl {b.pid}/{b.ttl} -> {a.pid}/{a.ttl} outside acquire/release"


@step_property
def monotone_task_resumes_grow_or_clear(s: Step) -> Iterator[Finding]:
    for b, a in _task_pairs(s):
        if 0 < a.resumes < b.resumes:
            yield (a.id,), f"resumes shrank from {b.resumes} to {a.resumes}"


@step_property
def consistent_task_resumes_cleared_only_on_dispatch_or_park(s: Step) -> Iterator[Finding]:
    """Cleared only by a task that ends acquired, suspended or fulfilled (an acquired task's
    300 suspend clears its buffered resumes without leaving acquired)."""
    for b, a in _task_pairs(s):
        if b.resumes and not a.resumes and a.state not in (ACQUIRED, SUSPENDED, FULFILLED):
            yield (a.id,), f"resumes cleared by {b.state} -> {a.state}"


@step_property
def consistent_task_acquisition_is_atomic(s: Step) -> Iterator[Finding]:
    for b, a in _task_pairs(s):
        if b.state == ACQUIRED or a.state != ACQUIRED:
            continue
        lease = s.after.lease.get(a.id)
        if not (
            b.state == PENDING_T
            and a.version == b.version + 1
            and a.pid is not None
            and a.ttl is not None
            and lease == s.now + a.ttl
            and a.id not in s.after.retry
            and a.resumes == 0
        ):
            yield (a.id,), f"{b} -> {a}, lease {lease}, retry {s.after.retry.get(a.id)}"


@step_property
def consistent_task_lease_deadline_is_now_plus_ttl(s: Step) -> Iterator[Finding]:
    for id in s.task_ids:
        lease, t = s.after.lease.get(id), s.after.tasks.get(id)
        if lease is None or lease == s.before.lease.get(id):
            continue
        if t is None or t.ttl is None or lease != s.now + t.ttl:
            yield (id,), f"lease set to {lease}, now {s.now}, ttl {t.ttl if t else None}"


@step_property
def consistent_task_retry_rearm_only_when_due(s: Step) -> Iterator[Finding]:
    for b, a in _task_pairs(s):
        old, new = s.before.retry.get(a.id), s.after.retry.get(a.id)
        both_pending = b.state == a.state == PENDING_T
        if both_pending and old is not None and new != old and old > s.now:
            yield (a.id,), f"retry moved from {old} to {new} before it was due (now {s.now})"


@step_property
def monotone_task_retry_rearm_advances(s: Step) -> Iterator[Finding]:
    for id in s.task_ids:
        new = s.after.retry.get(id)
        if new is not None and new != s.before.retry.get(id) and new <= s.now:
            yield (id,), f"retry armed at {new}, not after now {s.now}"


@step_property
def eager_pending_entry_arms_retry(s: Step) -> Iterator[Finding]:
    """83d64c3's form of 47 and 50: a task entering pending (released, expired, woken or
    continued) is re-armed at ``now + retryTimeout`` and offered with an execute at once."""
    for b, a in _task_pairs(s):
        if b.state == PENDING_T or a.state != PENDING_T:
            continue
        retry = s.after.retry.get(a.id)
        if retry != s.now + s.retry_timeout:
            yield (a.id,), f"entered pending with retry {retry}, now {s.now}"
        if not s.outbox_retained:
            continue
        entry = s.after.messages.get(("execute", a.id))
        version = entry.message.data.task.version if entry else None  # type: ignore[union-attr]
        if version != a.version:
            yield (a.id,), f"entered pending at v{a.version}, outbox execute v{version}"


# -- transition properties: the outbox and schedules --------------------------------------


def _new_messages(s: Step) -> Iterator[OutboxEntry]:
    """Messages the step enqueued: a key not there before, or an entry that changed."""
    for key, entry in s.after.messages.items():
        if s.before.messages.get(key) != entry:
            yield entry


@step_property
def monotone_outbox_keys_never_disappear(s: Step) -> Iterator[Finding]:
    if not s.outbox_retained:
        return
    for key in s.before.messages.keys() - s.after.messages.keys():
        yield key[1:], f"outbox entry {key} disappeared"


@step_property
def consistent_new_execute_matches_task_and_target(s: Step) -> Iterator[Finding]:
    for entry in _new_messages(s):
        data = entry.message.data
        if not isinstance(data, ExecuteData):
            continue
        t, p = s.after.tasks.get(data.task.id), s.after.promises.get(data.task.id)
        target = p.tags.get(TARGET, "") if p else None
        if t is None or data.task.version != t.version or entry.address != target:
            yield (
                (data.task.id,),
                (
                    f"execute v{data.task.version} to {entry.address!r}; task "
                    f"v{t.version if t else None}, target {target!r}"
                ),
            )


@step_property
def consistent_new_unblock_carries_stored_record(s: Step) -> Iterator[Finding]:
    for entry in _new_messages(s):
        data = entry.message.data
        if isinstance(data, UnblockData) and data.promise != s.after.promises.get(data.promise.id):
            yield (data.promise.id,), "unblock carries a record other than the stored one"


@step_property
def consistent_new_unblock_discharges_its_listener(s: Step) -> Iterator[Finding]:
    for entry in _new_messages(s):
        data = entry.message.data
        if not isinstance(data, UnblockData):
            continue
        id = data.promise.id
        held_before = entry.address in _ledger(s.before, "listeners", id)
        held_after = entry.address in _ledger(s.after, "listeners", id)
        if not held_before or held_after:
            yield (id,), f"unblock to {entry.address} without discharging that listener"


@step_property
def preserved_schedule_birth_fields_immutable(s: Step) -> Iterator[Finding]:
    fields = ("cron", "promise_id", "promise_timeout", "promise_param", "promise_tags")
    for id, a in s.after.schedules.items():
        b = s.before.schedules.get(id)
        if b is None:
            continue
        for field in (*fields, "created_at"):
            if getattr(b, field) != getattr(a, field):
                yield (id,), f"{field} changed from {getattr(b, field)} to {getattr(a, field)}"
