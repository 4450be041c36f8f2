"""The task properties: what one task record and its two timeout rows (its retry while
pending, its lease while acquired) must satisfy in every state, and how a task may change
in one step: the admissible edges, acquisition and release of a lease, resumes, retries,
and the couplings of a task's changes to its promise's (birth, settlement) and to the
callbacks consumed on its behalf.

Whether a task and its promise agree within one state is in ``store``; the execute a task is
offered, in ``outbox``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from troth.oracle.invariants.core import (
    PENDING,
    Finding,
    Step,
    View,
    _ledger,
    _new_promises,
    _promise_pairs,
    settled,
    state_property,
    step_property,
    targeted,
)
from troth.protocol.records import TaskRecord, TaskState

# -- state properties ----------------------------------------------------------------------


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


# -- transition properties -----------------------------------------------------------------


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
