"""The promise properties: what one promise record and its two ledgers (the callbacks
awaiting it, the listeners waiting on it) must satisfy in every state, and how a promise
may change in one step (birth, settlement, the ledgers growing and draining).

A promise's task, its messages and its timeout row are judged by ``tasks``, ``outbox``
and ``timers``; the properties tying a promise to another object's state are in ``store``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from troth.oracle.invariants.core import (
    PENDING,
    Finding,
    Step,
    View,
    _duplicates,
    _ledger,
    _new_promises,
    _promise_pairs,
    at_deadline_verdict,
    empty,
    settled,
    state_property,
    step_property,
)
from troth.protocol.records import PromiseState

# -- state properties ----------------------------------------------------------------------


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


# -- transition properties -----------------------------------------------------------------


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
