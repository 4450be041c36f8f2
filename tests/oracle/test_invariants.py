"""Every property the checker implements, shown failing on a hand-made state or step.

Each case is a pair: a snapshot (or step) that satisfies *every* property, and one that
breaks the named property (other properties may break with it). The worlds start from
``base()``, a small 83d64c3 state at ``NOW`` with one object in each interesting shape, and
the steps are hand-written versions of the machine's transitions.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec
import pytest

from tests.support.snapshots import ADDRESS, LISTENER, World
from troth.oracle.invariants import (
    PROSE_NAMES,
    STATE_PROPERTIES,
    STEP_PROPERTIES,
    check_state,
    check_step,
)
from troth.protocol.messages import execute_message
from troth.protocol.records import TARGET, TIMER, Value
from troth.protocol.responses import OutboxEntry, Snapshot

NOW = 1000
R = 5000  # retryTimeout

Build = Callable[[], World]


def base() -> World:
    """A consistent state at NOW, one object of each kind the properties talk about.

    a    pending, targeted; task acquired v1 (lease 2000); an old execute v0
    a.1  pending, targeted; task suspended, awaiting a.2
    a.2  pending timer (armed, no task); holds a.1's callback and a listener
    b    pending, targeted; task pending v0 (retry 6000) with its execute
    b.1  resolved by a client at 500; task fulfilled; its listener got an unblock
    b.2  born dead at 800 (createdAt = settledAt = timeoutAt); task fulfilled
    c    pending, internal (no tags, no timeout row)
    c.1  pending, targeted; task halted v2 with one buffered resume
    s1   a schedule that never fired; s2 one that fired at 500
    """
    w = World()
    w.promise("a").task("a", "acquired").execute("a", 0)
    w.promise("a.1").task("a.1", "suspended", 1).callback("a.2", "a.1")
    w.promise("a.2", tags={TIMER: "true"}).listener("a.2")
    w.promise("b").task("b").execute("b")
    w.promise("b.1", "resolved", value=Value(data="eA==")).task("b.1", "fulfilled")
    w.unblock("b.1")
    w.promise("b.2", "rejected_timedout", created_at=800, timeout_at=800).task("b.2", "fulfilled")
    w.promise("c", tags={})
    w.promise("c.1").task("c.1", "halted", 2, resumes=1)
    w.schedule("s1").schedule("s2", last_run_at=500)
    return w


def with_rows(snap: Snapshot, **extra: list) -> Snapshot:
    """The snapshot with more rows in some lists (duplicates a World cannot hold)."""
    return msgspec.structs.replace(
        snap, **{name: [*getattr(snap, name), *rows] for name, rows in extra.items()}
    )


# -- state cases: name -> (good, bad) -------------------------------------------------------

StateCase = tuple[Callable[[], Snapshot], Callable[[], Snapshot]]


def _good() -> Snapshot:
    return base().snap()


def _bad(change: Callable[[World], object]) -> Callable[[], Snapshot]:
    def build() -> Snapshot:
        w = base()
        change(w)
        return w.snap()

    return build


def _duplicate(rows: str) -> Callable[[], Snapshot]:
    def build() -> Snapshot:
        snap = base().snap()
        return with_rows(snap, **{rows: [getattr(snap, rows)[0]]})

    return build


STATE_CASES: dict[str, StateCase] = {
    "well_formed_promise_created_at_lte_timeout_at": (
        _good,
        _bad(lambda w: w.promise("b.1", "resolved", created_at=300, timeout_at=200)),
    ),
    "well_formed_promise_pending_created_before_deadline": (
        _good,
        _bad(lambda w: w.promise("c", tags={}, created_at=900, timeout_at=900)),
    ),
    "well_formed_promise_settled_at_lte_timeout_at": (
        _good,
        _bad(lambda w: w.promise_with("b.1", timeout_at=400)),
    ),
    "well_formed_promise_created_at_lte_settled_at": (
        _good,
        _bad(lambda w: w.promise_with("b.1", created_at=600)),
    ),
    "well_formed_promise_settled_at_iff_not_pending": (
        _good,
        _bad(lambda w: w.promise_with("c", settled_at=500)),
    ),
    "well_formed_promise_pending_has_no_value": (
        _good,
        _bad(lambda w: w.promise_with("c", value=Value(data="eA=="))),
    ),
    "well_formed_promise_deadline_verdict_matches_timer_tag": (
        _good,
        _bad(lambda w: w.promise_with("b.2", state="resolved")),
    ),
    "well_formed_promise_deadline_settlement_has_no_value": (
        _good,
        _bad(lambda w: w.promise_with("b.2", value=Value(data="eA=="))),
    ),
    "well_formed_promise_timedout_is_server_owned": (
        _good,
        _bad(lambda w: w.promise_with("b.1", state="rejected_timedout")),
    ),
    "well_formed_promise_callbacks_unique": (_good, _duplicate("callbacks")),
    "well_formed_promise_listeners_unique": (_good, _duplicate("listeners")),
    "well_formed_promise_awaiter_is_not_self": (
        _good,
        _bad(lambda w: w.callback("a.1", "a.1")),
    ),
    "well_formed_promise_created_at_lte_now": (
        _good,
        _bad(lambda w: w.promise("c", tags={}, created_at=NOW + 1)),
    ),
    "well_formed_promise_settled_at_lte_now": (
        _good,
        _bad(lambda w: w.promise_with("b.1", settled_at=NOW + 1)),
    ),
    "well_formed_task_acquired_iff_has_pid": (
        _good,
        _bad(lambda w: w.task_with("a", pid=None)),
    ),
    "well_formed_task_acquired_iff_has_ttl": (
        _good,
        _bad(lambda w: w.task_with("c.1", ttl=1000)),
    ),
    "well_formed_task_acquired_iff_has_expires_at": (
        _good,
        _bad(lambda w: w.drop_timeout("a", 1)),
    ),
    "well_formed_task_pending_iff_has_retry_at": (
        _good,
        _bad(lambda w: w.drop_timeout("b", 0)),
    ),
    "well_formed_task_fulfilled_is_cleared": (
        _good,
        _bad(lambda w: w.task_with("b.1", resumes=1)),
    ),
    "well_formed_task_suspended_is_cleared": (
        _good,
        _bad(lambda w: w.task("a.1", "suspended", 1, lease=3000)),
    ),
    "well_formed_task_halted_is_cleared": (
        _good,
        _bad(lambda w: w.task("c.1", "halted", 2, resumes=1, retry=3000)),
    ),
    "well_formed_task_suspended_has_no_resumes": (
        _good,
        _bad(lambda w: w.task_with("a.1", resumes=1)),
    ),
    "well_formed_task_acquired_version_positive": (
        _good,
        _bad(lambda w: w.task_with("a", version=0)),
    ),
    "well_formed_schedule_created_at_lte_next_run_at": (
        _good,
        _bad(lambda w: w.schedule("s1", created_at=2500, next_run_at=2000)),
    ),
    "well_formed_schedule_created_at_lte_last_run_at": (
        _good,
        _bad(lambda w: w.schedule("s2", created_at=600, last_run_at=500)),
    ),
    "well_formed_schedule_last_run_at_lt_next_run_at": (
        _good,
        _bad(lambda w: w.schedule("s2", last_run_at=2000, next_run_at=2000)),
    ),
    "well_formed_store_promise_ids_unique": (_good, _duplicate("promises")),
    "well_formed_store_task_ids_unique": (_good, _duplicate("tasks")),
    "well_formed_store_schedule_ids_unique": (_good, _duplicate("schedules")),
    "well_formed_store_outbox_keys_unique": (
        _good,
        lambda: with_rows(
            base().snap(), messages=[OutboxEntry(ADDRESS, execute_message("b", 0, "other"))]
        ),
    ),
    "consistent_task_iff_targeted_promise": (
        _good,
        _bad(lambda w: w.task("c", "suspended")),
    ),
    "consistent_settled_promise_has_fulfilled_task": (
        _good,
        _bad(lambda w: w.task("b.1", "halted")),
    ),
    "consistent_callback_awaiter_is_targeted": (
        _good,
        _bad(lambda w: w.callback("a.2", "c")),
    ),
    "consistent_listener_addresses_deliverable": (
        _good,
        _bad(lambda w: w.listener("a.2", "mailto:x@y")),
    ),
    "consistent_outbox_execute_names_existing_task": (
        _good,
        _bad(lambda w: w.execute("c", 0)),
    ),
    "consistent_outbox_never_ahead": (
        _good,
        _bad(lambda w: w.execute("b", 1)),
    ),
    "consistent_outbox_execute_address_is_target_tag": (
        _good,
        _bad(lambda w: w.execute("b", address="poll://any@elsewhere")),
    ),
    "consistent_outbox_unblock_names_settled_promise": (
        _good,
        _bad(lambda w: w.unblock("a.2")),
    ),
    "consistent_outbox_unblock_address_deliverable": (
        _good,
        _bad(lambda w: w.unblock("b.1", "mailto:x@y")),
    ),
    "consistent_settled_task_promise_settled": (
        _good,
        _bad(lambda w: w.task("c.1", "fulfilled", 2)),
    ),
    "consistent_suspended_task_holds_rung": (
        _good,
        _bad(lambda w: w.uncallback("a.2", "a.1")),
    ),
    "missing_ptimeout": (
        _good,
        _bad(lambda w: w.promise_timeouts.pop("a.2")),
    ),
    "arming_is_external_only": (
        _good,
        _bad(lambda w: w.promise_timeouts.update(c=10_000)),
    ),
    "stale_ptimeout": (
        _good,
        _bad(lambda w: w.promise_timeouts.update({"b.1": 10_000})),
    ),
    "stale_ttimeout": (
        _good,
        _bad(lambda w: w.task_timeouts.update({("zz", 0): 6000})),
    ),
    "schedule_timeout_matches_next_run_at": (
        _good,
        _bad(lambda w: w.schedule_timeouts.update(s1=2500)),
    ),
    "listener_for_settled_promise": (
        _good,
        _bad(lambda w: w.listener("b.1")),
    ),
    "callback_for_settled_promise": (
        _good,
        _bad(lambda w: w.callback("b.1", "a.1")),
    ),
}


def names(violations: list) -> set[str]:
    return {v.name for v in violations}


def test_every_state_property_has_a_case() -> None:
    assert set(STATE_CASES) == set(STATE_PROPERTIES)


def test_the_base_world_satisfies_every_state_property() -> None:
    assert check_state(base().snap(), NOW) == []


@pytest.mark.parametrize("name", sorted(STATE_CASES))
def test_state_property_fails_on_its_counterexample(name: str) -> None:
    good, bad = STATE_CASES[name]
    assert check_state(good(), NOW) == []
    violations = check_state(bad(), NOW)
    assert name in names(violations), violations


def test_a_suspended_task_whose_own_promise_is_dead_needs_no_rung() -> None:
    """TIMEOUT ALWAYS WINS: the qualifier on consistent_suspended_task_holds_rung."""
    w = base().uncallback("a.2", "a.1").promise("a.1", timeout_at=NOW)
    assert check_state(w.snap(), NOW) == []
    assert "consistent_suspended_task_holds_rung" in names(check_state(w.snap(), NOW - 1))


def test_prose_names_point_at_implemented_properties() -> None:
    assert set(PROSE_NAMES.values()) <= set(STATE_PROPERTIES)


# -- hand-made transitions of the machine, from base() at NOW -------------------------------


def settle(w: World, id: str, state: str = "resolved", at: int = NOW) -> World:
    """The settlement tail, for the objects base() has: record, task, ledgers, scrub."""
    w.promise_with(id, state=state, settled_at=at)
    w.promise_timeouts.pop(id, None)
    if id in w.tasks:
        w.task(id, "fulfilled", w.tasks[id].version)
    w.callbacks = {(p, a) for p, a in w.callbacks if p != id and a != id}
    for listened, address in [entry for entry in w.listeners if entry[0] == id]:
        w.unlisten(listened, address).unblock(id, address)
    return w


def settle_b() -> World:
    return settle(base(), "b")


def settle_a2() -> World:
    """The timer a.2 resolves: its listener gets an unblock and a.1 wakes with an execute."""
    w = settle(base(), "a.2")
    return w.task("a.1", "pending", 1, resumes=1, retry=NOW + R).execute("a.1")


def settle_a1() -> World:
    """The suspended a.1 settles itself: the scrub takes its callback off the pending a.2."""
    return settle(base(), "a.1")


def acquire_b() -> World:
    return base().task("b", "acquired", 1, lease=NOW + 1000)


def release_a() -> World:
    return base().task("a", "pending", 1, retry=NOW + R).execute("a")


def heartbeat_a() -> World:
    return base().task("a", "acquired", 1, lease=NOW + 1000)


def create_d() -> World:
    w = base().promise("d", created_at=NOW, timeout_at=NOW + 100)
    return w.task("d", retry=NOW + R).execute("d")


def suspend_300() -> World:
    """A 300 suspend: the acquired task keeps its lease and loses its buffered resumes."""
    return base().task_with("a", resumes=0)


def with_resumes(n: int) -> Build:
    return lambda: base().task_with("a", resumes=n)


def retry_fires(at: int) -> Build:
    return lambda: base().task("b", retry=at).execute("b")


def two_retries() -> World:
    """b's retry is due at 6000, d's at 8000."""
    return create_d().task("d", retry=8000)


def schedule_fires() -> World:
    w = base().schedule("s1", next_run_at=4000, last_run_at=2000)
    return w.promise("s1.2000", created_at=2000, timeout_at=3000).task("s1.2000", retry=2000 + R)


StepCase = tuple[Build, Build, Build, int]  # before, good after, bad after, now


def step(before: Build, good: Build, bad: Callable[[World], object], now: int = NOW) -> StepCase:
    def broken() -> World:
        w = good()
        bad(w)
        return w

    return before, good, broken, now


def timed_out() -> World:
    """b's deadline (900) has passed; the tick at NOW settles it."""
    return settle(base().promise("b", timeout_at=900), "b", "rejected_timedout", at=900)


STEP_CASES: dict[str, StepCase] = {
    "preserved_promise_birth_fields_immutable": step(
        base, settle_b, lambda w: w.promise_with("b", tags={TARGET: "poll://any@h"})
    ),
    "preserved_settled_promise_record": step(
        base, settle_b, lambda w: w.promise_with("b.1", value=Value())
    ),
    "monotone_promise_set_grows": step(base, settle_b, lambda w: w.promises.pop("c")),
    "monotone_task_set_grows": step(base, settle_b, lambda w: w.tasks.pop("b.2")),
    "monotone_task_version_increases_only_on_acquisition": step(
        base, acquire_b, lambda w: w.task_with("b", version=2)
    ),
    "preserved_fulfilled_task": step(base, settle_b, lambda w: w.task_with("b.1", version=1)),
    "preserved_promise_state_frozen_once_settled": step(
        base, settle_b, lambda w: w.promise_with("b.1", state="rejected")
    ),
    "preserved_promise_settlement_is_one_way": step(
        base, settle_b, lambda w: w.promise_with("b.1", state="pending", settled_at=None)
    ),
    "consistent_promise_settled_at_moves_with_state": step(
        base, settle_b, lambda w: w.promise_with("b.1", settled_at=600)
    ),
    "preserved_promise_value_until_settlement": step(
        base, settle_b, lambda w: w.promise_with("c", value=Value(data="eA=="))
    ),
    "preserved_promise_no_duplicate_ids": step(
        # A second row for "d" (a World holds one per key, so file it under another).
        base,
        create_d,
        lambda w: w.promises.update({"d ": w.promises["d"]}),
    ),
    "monotone_promise_callbacks_shrink_once_settled": step(
        base, settle_a2, lambda w: w.callback("a.2", "a")
    ),
    "monotone_promise_listeners_grow_while_pending": step(
        base, settle_b, lambda w: w.unlisten("a.2")
    ),
    "monotone_promise_listeners_shrink_once_settled": step(
        base, settle_a2, lambda w: w.listener("a.2", "poll://any@h")
    ),
    "consistent_promise_state_edge_admissible": step(
        base, settle_b, lambda w: w.promise_with("b.2", state="rejected_canceled")
    ),
    "consistent_obligation_discharge_requires_settlement_or_scrub": step(
        base, settle_a1, lambda w: w.promise_with("a.1", state="pending", settled_at=None)
    ),
    "consistent_promise_settlement_stamp": step(
        base, settle_b, lambda w: w.promise_with("b", settled_at=NOW - 1)
    ),
    "preserved_timedout_is_server_owned": step(
        lambda: base().promise("b", timeout_at=900),
        timed_out,
        lambda w: w.promise_with("b", settled_at=NOW),
    ),
    "consistent_new_promise_born_clean": step(
        base, create_d, lambda w: w.promise_with("d", value=Value(data="eA=="))
    ),
    "consistent_task_state_edge_admissible": step(
        base, settle_b, lambda w: w.task("a.1", "acquired", 1)
    ),
    "preserved_task_acquisition_only_from_pending": step(
        base, acquire_b, lambda w: w.task("c.1", "acquired", 2)
    ),
    "preserved_task_suspension_only_from_acquired": step(
        base, acquire_b, lambda w: w.task("c.1", "suspended", 2).callback("a.2", "c.1")
    ),
    "preserved_task_halted_only_reenters_via_pending": step(
        base, acquire_b, lambda w: w.task("c.1", "suspended", 2).callback("a.2", "c.1")
    ),
    "consistent_settlement_fulfils_task": step(base, settle_b, lambda w: w.task("b")),
    "consistent_task_fulfilment_needs_settlement": step(
        base, settle_b, lambda w: w.task("c.1", "fulfilled", 2)
    ),
    "consistent_callback_consumption_resumes_awaiter": step(
        base, settle_a2, lambda w: w.task_with("a.1", resumes=0)
    ),
    "consistent_listener_consumption_enqueues_unblock": step(
        base, settle_a2, lambda w: w.unsend("unblock", "a.2", LISTENER)
    ),
    "consistent_wake_follows_callback_consumption": step(
        base, settle_a2, lambda w: w.task_with("a.1", resumes=0)
    ),
    "consistent_task_birth_couples_promise_birth": step(base, create_d, lambda w: w.task("c")),
    "monotone_outbox_keys_never_disappear": step(
        base, settle_b, lambda w: w.unsend("execute", "a")
    ),
    "consistent_new_execute_matches_task_and_target": step(
        base, release_a, lambda w: w.execute("a", 0, ADDRESS + "/w1")
    ),
    "consistent_new_unblock_carries_stored_record": step(
        base, settle_a2, lambda w: w.unblock("a.2", record=base().promises["a.2"])
    ),
    "consistent_new_unblock_discharges_its_listener": step(
        base, settle_a2, lambda w: w.unblock("a.2", "poll://any@h")
    ),
    "preserved_schedule_birth_fields_immutable": step(
        base,
        schedule_fires,
        lambda w: w.schedule("s2", last_run_at=500, promise_timeout=9),
        now=2000,
    ),
    "consistent_task_birth_state": step(
        base, create_d, lambda w: w.drop_timeout("d", 0).task_with("d", resumes=1)
    ),
    "consistent_task_lease_released_atomically": step(
        base, release_a, lambda w: w.task_with("a", version=2)
    ),
    "preserved_task_lease_holder_stable": step(
        base, heartbeat_a, lambda w: w.task_with("a", pid="w2")
    ),
    "consistent_task_lease_fields_move_together": step(
        base, heartbeat_a, lambda w: w.task_with("a", ttl=2000)
    ),
    "monotone_task_resumes_grow_or_clear": step(
        with_resumes(2), with_resumes(3), lambda w: w.task_with("a", resumes=1)
    ),
    "consistent_task_resumes_cleared_only_on_dispatch_or_park": step(
        with_resumes(2), suspend_300, lambda w: w.task_with("c.1", resumes=0)
    ),
    "consistent_task_acquisition_is_atomic": step(
        base, acquire_b, lambda w: w.task_with("b", resumes=1)
    ),
    "consistent_task_lease_deadline_is_now_plus_ttl": step(
        base, heartbeat_a, lambda w: w.task("a", "acquired", lease=NOW + 999)
    ),
    "consistent_task_retry_rearm_only_when_due": step(
        two_retries,
        lambda: two_retries().task("b", retry=6000 + R),
        lambda w: w.task("d", retry=9000),
        now=6000,
    ),
    "monotone_task_retry_rearm_advances": step(
        base, retry_fires(7000 + R), lambda w: w.task("b", retry=7000), now=7000
    ),
    "eager_pending_entry_arms_retry": step(
        base, release_a, lambda w: w.task("a", "pending", 1, retry=NOW + 1)
    ),
}


def test_every_step_property_has_a_case() -> None:
    assert set(STEP_CASES) == set(STEP_PROPERTIES)


@pytest.mark.parametrize("name", sorted(STEP_CASES))
def test_step_property_fails_on_its_counterexample(name: str) -> None:
    before, good, bad, now = STEP_CASES[name]
    b, a = before().snap(), good().snap()
    assert check_state(b, now) == []
    assert check_state(a, now) == []
    assert check_step(b, a, now) == []
    violations = check_step(b, bad().snap(), now)
    assert name in names(violations), violations


def test_a_server_that_delivers_messages_may_empty_its_outbox() -> None:
    """outbox_retained=False: what delivery removes is not held against the server."""
    before, after = base().snap(), settle_a2().unsend("unblock", "a.2", LISTENER)
    after.unsend("execute", "a").unsend("execute", "a.1")
    assert check_step(before, after.snap(), NOW, outbox_retained=False) == []
    retained = names(check_step(before, after.snap(), NOW))
    assert {"monotone_outbox_keys_never_disappear", "eager_pending_entry_arms_retry"} <= retained
    assert "consistent_listener_consumption_enqueues_unblock" in retained


def test_a_tick_may_create_and_time_out_a_backlogged_occurrence() -> None:
    """A schedule occurrence born at its own past instant and timed out in the same tick."""
    after = base().schedule("s1", next_run_at=4000, last_run_at=2000)
    after.promise("s1.2000", "rejected_timedout", created_at=2000, timeout_at=3000)
    after.task("s1.2000", "fulfilled").execute("s1.2000")
    assert check_step(base().snap(), after.snap(), 3500) == []
    assert check_state(after.snap(), 3500) == []
