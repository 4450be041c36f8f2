"""Scenarios for the promise handlers: P-01..P-05 of ``02-actions``."""

from __future__ import annotations

from .build import (
    L1,
    L2,
    TARGETED,
    TIMER,
    Machine,
    R,
    awaits,
    callback,
    claim,
    create,
    execute,
    leased,
    listen,
    listener,
    ok,
    park,
    plain,
    promise,
    retry,
    settle,
    snap,
    spawn,
    state,
    status,
    task,
    task_id,
    timeout,
    unblock,
)

# -- P-01 promise.get -----------------------------------------------------------------------


def scenario_promise_get_answers_404_for_an_unknown_promise(m: Machine) -> None:
    """P-01-promise.get: ``getPromise`` is none → 404."""
    assert status(m, "promise.get", {"id": "nope"}, 0) == 404


def scenario_promise_get_answers_a_live_pending_promise_as_stored(m: Machine) -> None:
    """P-01-promise.get: pending and ``timeoutAt > now`` → the stored record."""
    plain(m, "p", 1000, now=0)
    body = ok(m, "promise.get", {"id": "p"}, 999)
    assert body == {"promise": promise("p", "pending", 1000, 0)}


def scenario_promise_get_projects_a_promise_at_its_deadline_as_timed_out(m: Machine) -> None:
    """P-01-promise.get: pending, ``timeoutAt ≤ now`` → projected rejected_timedout, no write."""
    plain(m, "p", 1000, now=0)
    body = ok(m, "promise.get", {"id": "p"}, 1000)
    assert body == {"promise": promise("p", "rejected_timedout", 1000, 0, settled_at=1000)}
    assert snap(m) == state(promises=[promise("p", "pending", 1000, 0)])


def scenario_promise_get_projects_a_dead_timer_as_resolved(m: Machine) -> None:
    """P-01-promise.get: a dead timer projects to resolved with ``settledAt = timeoutAt``."""
    plain(m, "p", 1000, now=0, timer="true")
    body = ok(m, "promise.get", {"id": "p"}, 5000)
    assert body == {"promise": promise("p", "resolved", 1000, 0, tags=TIMER, settled_at=1000)}


def scenario_promise_get_answers_a_settled_promise_as_stored(m: Machine) -> None:
    """P-01-promise.get: not pending → the stored record, even past its deadline."""
    plain(m, "p", 1000, now=0)
    ok(m, "promise.settle", settle("p", "rejected", {"data": "eA=="}), 10)
    body = ok(m, "promise.get", {"id": "p"}, 5000)
    expected = promise("p", "rejected", 1000, 0, settled_at=10, value={"data": "eA=="})
    assert body == {"promise": expected}


# -- P-02 promise.create --------------------------------------------------------------------


def scenario_promise_create_stores_a_live_plain_promise_without_timeout(m: Machine) -> None:
    """P-02-promise.create: new, live, not external → pending, no timeout, no task."""
    body = ok(m, "promise.create", create("p", 1000, param={"data": "cA=="}), 5)
    expected = promise("p", "pending", 1000, 5, param={"data": "cA=="})
    assert body == {"promise": expected}
    assert snap(m) == state(promises=[expected])


def scenario_promise_create_arms_a_timeout_for_a_live_timer(m: Machine) -> None:
    """P-02-promise.create: ``external`` includes timers → ``setPromiseTimeout``, no task."""
    body = ok(m, "promise.create", create("p", 1000, TIMER), 5)
    expected = promise("p", "pending", 1000, 5, tags=TIMER)
    assert body == {"promise": expected}
    assert snap(m) == state(promises=[expected], promiseTimeouts=[timeout("p", 1000)])


def scenario_promise_create_with_target_spawns_a_task_and_an_execute(m: Machine) -> None:
    """P-02-promise.create: new, live, target, no delay → task v0, retry at now+R, execute."""
    body = ok(m, "promise.create", create("p", 100_000, TARGETED), 7)
    expected = promise("p", "pending", 100_000, 7, tags=TARGETED)
    assert body == {"promise": expected}
    assert snap(m) == state(
        promises=[expected],
        promiseTimeouts=[timeout("p", 100_000)],
        tasks=[task("p", "pending", 0)],
        taskTimeouts=[retry("p", 7 + R)],
        messages=[execute("p", 0)],
    )


def scenario_promise_create_with_future_delay_defers_the_execute(m: Machine) -> None:
    """P-02-promise.create: ``delay > now`` → retry armed at the delay instant, no message."""
    tags = {**TARGETED, "resonate:delay": "30000"}
    ok(m, "promise.create", create("p", 100_000, tags), 1000)
    assert snap(m) == state(
        promises=[promise("p", "pending", 100_000, 1000, tags=tags)],
        promiseTimeouts=[timeout("p", 100_000)],
        tasks=[task("p", "pending", 0)],
        taskTimeouts=[retry("p", 30_000)],
    )


def scenario_promise_create_with_past_delay_dispatches_at_once(m: Machine) -> None:
    """P-02-promise.create: ``delay ≤ now`` → as without delay: retry at now+R and execute."""
    tags = {**TARGETED, "resonate:delay": "500"}
    ok(m, "promise.create", create("p", 100_000, tags), 1000)
    assert snap(m) == state(
        promises=[promise("p", "pending", 100_000, 1000, tags=tags)],
        promiseTimeouts=[timeout("p", 100_000)],
        tasks=[task("p", "pending", 0)],
        taskTimeouts=[retry("p", 1000 + R)],
        messages=[execute("p", 0)],
    )


def scenario_promise_create_with_delay_equal_to_now_dispatches_at_once(m: Machine) -> None:
    """P-02-promise.create: the delay test is strict (``delay > now``); equal → immediate."""
    tags = {**TARGETED, "resonate:delay": "1000"}
    ok(m, "promise.create", create("p", 100_000, tags), 1000)
    s = snap(m)
    assert s["taskTimeouts"] == [retry("p", 1000 + R)]
    assert s["messages"] == [execute("p", 0)]


def scenario_promise_create_past_deadline_is_born_timed_out(m: Machine) -> None:
    """P-02-promise.create: new, ``timeoutAt ≤ now`` → rejected_timedout, created = settled
    = timeoutAt, no timeout."""
    body = ok(m, "promise.create", create("p", 1000, param={"data": "cA=="}), 1000)
    expected = promise(
        "p", "rejected_timedout", 1000, 1000, settled_at=1000, param={"data": "cA=="}
    )
    assert body == {"promise": expected}
    assert snap(m) == state(promises=[expected])


def scenario_promise_create_past_deadline_timer_is_born_resolved(m: Machine) -> None:
    """P-02-promise.create: a dead-born timer is resolved."""
    body = ok(m, "promise.create", create("p", 1000, TIMER), 2000)
    expected = promise("p", "resolved", 1000, 1000, tags=TIMER, settled_at=1000)
    assert body == {"promise": expected}
    assert snap(m) == state(promises=[expected])


def scenario_promise_create_past_deadline_with_target_gets_a_fulfilled_task(m: Machine) -> None:
    """P-02-promise.create: dead birth with a target → task fulfilled v0; no message, no
    timeouts."""
    ok(m, "promise.create", create("p", 1000, TARGETED), 2000)
    assert snap(m) == state(
        promises=[promise("p", "rejected_timedout", 1000, 1000, tags=TARGETED, settled_at=1000)],
        tasks=[task("p", "fulfilled", 0)],
    )


def scenario_promise_create_of_an_existing_promise_answers_it_unchanged(m: Machine) -> None:
    """P-02-promise.create: exists, live → the stored record; the request is not compared."""
    spawn(m, "p", 100_000, now=0)
    before = snap(m)
    body = ok(m, "promise.create", create("p", 5000, TIMER, {"data": "eA=="}), 10)
    assert body == {"promise": promise("p", "pending", 100_000, 0, tags=TARGETED)}
    assert snap(m) == before


def scenario_promise_create_of_an_existing_dead_promise_projects_it(m: Machine) -> None:
    """P-02-promise.create: exists, pending, ``timeoutAt ≤ now`` → projected, no write."""
    spawn(m, "p", 1000, now=0)
    before = snap(m)
    body = ok(m, "promise.create", create("p", 9000, TARGETED), 1000)
    assert body == {
        "promise": promise("p", "rejected_timedout", 1000, 0, tags=TARGETED, settled_at=1000)
    }
    assert snap(m) == before


def scenario_promise_create_of_a_settled_promise_answers_it_as_stored(m: Machine) -> None:
    """P-02-promise.create: exists, settled → the stored record."""
    plain(m, "p", 1000, now=0)
    ok(m, "promise.settle", settle("p", "resolved"), 1)
    body = ok(m, "promise.create", create("p", 1000), 2)
    assert body == {"promise": promise("p", "resolved", 1000, 0, settled_at=1)}


# -- P-03 promise.settle --------------------------------------------------------------------


def scenario_promise_settle_answers_404_for_an_unknown_promise(m: Machine) -> None:
    """P-03-promise.settle: ``getPromise`` is none → 404, nothing written."""
    assert status(m, "promise.settle", settle("nope"), 0) == 404
    assert snap(m) == state()


def scenario_promise_settle_settles_a_live_plain_promise(m: Machine) -> None:
    """P-03-promise.settle: pending and live → req.state, req.value, ``settledAt = now``."""
    plain(m, "p", 1000, now=0)
    body = ok(m, "promise.settle", settle("p", "rejected_canceled", {"data": "eQ=="}), 999)
    expected = promise("p", "rejected_canceled", 1000, 0, settled_at=999, value={"data": "eQ=="})
    assert body == {"promise": expected}
    assert snap(m) == state(promises=[expected])


def scenario_promise_settle_fulfils_a_pending_task_and_drops_its_timeouts(m: Machine) -> None:
    """P-03-promise.settle: ``delPromiseTimeout``; own task → fulfilled; ``delTaskTimeout``.
    The execute already in the outbox stays (outbox rows are never deleted)."""
    spawn(m, "p", 100_000, now=0)
    body = ok(m, "promise.settle", settle("p", "resolved"), 50)
    expected = promise("p", "resolved", 100_000, 0, tags=TARGETED, settled_at=50)
    assert body == {"promise": expected}
    assert snap(m) == state(
        promises=[expected], tasks=[task("p", "fulfilled", 0)], messages=[execute("p", 0)]
    )


def scenario_promise_settle_fulfils_an_acquired_task_and_drops_its_lease(m: Machine) -> None:
    """P-03-promise.settle: the tail fulfils the task in any state (pid/ttl cleared, version
    kept)."""
    claim(m, "p", 100_000, now=0)
    ok(m, "promise.settle", settle("p", "resolved"), 50)
    s = snap(m)
    assert s["tasks"] == [task("p", "fulfilled", 1)]
    assert s["taskTimeouts"] == []
    assert s["promiseTimeouts"] == []


def scenario_promise_settle_fulfils_a_suspended_task(m: Machine) -> None:
    """P-03-promise.settle: a suspended task is fulfilled by its own promise's settlement;
    its callback on the awaited promise is scrubbed."""
    claim(m, "p", 100_000, now=0)
    plain(m, "p:1", 100_000, now=0)
    park(m, "p", 1, 10, "p:1")
    ok(m, "promise.settle", settle("p", "rejected"), 20)
    s = snap(m)
    assert s["tasks"] == [task("p", "fulfilled", 1)]
    assert s["callbacks"] == []


def scenario_promise_settle_fulfils_a_halted_task(m: Machine) -> None:
    """P-03-promise.settle: a halted task is fulfilled too."""
    spawn(m, "p", 100_000, now=0)
    ok(m, "task.halt", task_id("p"), 10)
    ok(m, "promise.settle", settle("p", "resolved"), 20)
    assert snap(m)["tasks"] == [task("p", "fulfilled", 0)]


def scenario_promise_settle_unblocks_every_listener_with_the_settled_record(m: Machine) -> None:
    """P-03-promise.settle: ``setMessage address (.unblock p.toRecord)`` per listener; the
    listener ledger is emptied."""
    plain(m, "p", 1000, now=0)
    ok(m, "promise.register_listener", listen("p", L1), 1)
    ok(m, "promise.register_listener", listen("p", L2), 2)
    ok(m, "promise.settle", settle("p", "resolved", {"data": "dg=="}), 3)
    settled = promise("p", "resolved", 1000, 0, settled_at=3, value={"data": "dg=="})
    assert snap(m) == state(
        promises=[settled], messages=[unblock(L1, settled), unblock(L2, settled)]
    )


def scenario_promise_settle_scrubs_the_settled_id_from_pending_callbacks(m: Machine) -> None:
    """P-03-promise.settle: settlement scrub — a settled awaiter is removed from the
    ``callbacks`` of every pending promise."""
    spawn(m, "p", 100_000, now=0)
    plain(m, "p:1", 100_000, now=0)
    ok(m, "promise.register_callback", callback("p:1", "p"), 1)
    assert snap(m)["callbacks"] == [awaits("p", "p:1")]
    ok(m, "promise.settle", settle("p", "resolved"), 2)
    assert snap(m)["callbacks"] == []


def scenario_promise_settle_of_a_dead_promise_answers_the_projection(m: Machine) -> None:
    """P-03-promise.settle: pending, ``timeoutAt ≤ now`` → projected record, no write."""
    spawn(m, "p", 1000, now=0)
    before = snap(m)
    body = ok(m, "promise.settle", settle("p", "resolved"), 1000)
    assert body == {
        "promise": promise("p", "rejected_timedout", 1000, 0, tags=TARGETED, settled_at=1000)
    }
    assert snap(m) == before


def scenario_promise_settle_of_a_dead_timer_answers_resolved(m: Machine) -> None:
    """P-03-promise.settle: the projection of a dead timer is resolved."""
    plain(m, "p", 1000, now=0, timer="true")
    body = ok(m, "promise.settle", settle("p", "rejected"), 3000)
    assert body == {"promise": promise("p", "resolved", 1000, 0, tags=TIMER, settled_at=1000)}


def scenario_promise_settle_of_a_settled_promise_answers_it_unchanged(m: Machine) -> None:
    """P-03-promise.settle: not pending → the stored record; no comparison, no write."""
    plain(m, "p", 1000, now=0)
    ok(m, "promise.settle", settle("p", "resolved", {"data": "YQ=="}), 1)
    before = snap(m)
    body = ok(m, "promise.settle", settle("p", "rejected", {"data": "Yg=="}), 2)
    assert body == {
        "promise": promise("p", "resolved", 1000, 0, settled_at=1, value={"data": "YQ=="})
    }
    assert snap(m) == before


# -- P-04 promise.register_callback ---------------------------------------------------------


def scenario_register_callback_answers_404_when_the_awaited_is_missing(m: Machine) -> None:
    """P-04-promise.register_callback: awaited absent → 404, before the awaiter is looked at."""
    assert status(m, "promise.register_callback", callback("p:1", "p"), 0) == 404


def scenario_register_callback_answers_422_when_the_awaiter_is_missing(m: Machine) -> None:
    """P-04-promise.register_callback: awaiter absent → 422."""
    plain(m, "p:1", 1000, now=0)
    assert status(m, "promise.register_callback", callback("p:1", "p"), 0) == 422
    assert snap(m)["callbacks"] == []


def scenario_register_callback_answers_422_when_the_awaiter_has_no_target(m: Machine) -> None:
    """P-04-promise.register_callback: awaiter without ``resonate:target`` → 422."""
    plain(m, "p:1", 1000, now=0)
    plain(m, "p", 1000, now=0)
    assert status(m, "promise.register_callback", callback("p:1", "p"), 0) == 422
    assert snap(m)["callbacks"] == []


def scenario_register_callback_records_a_live_awaiter_on_a_live_promise(m: Machine) -> None:
    """P-04-promise.register_callback: both live → ``addCallback``; answers the awaited."""
    spawn(m, "p", 100_000, now=0)
    plain(m, "p:1", 50_000, now=0)
    body = ok(m, "promise.register_callback", callback("p:1", "p"), 10)
    assert body == {"promise": promise("p:1", "pending", 50_000, 0)}
    assert snap(m)["callbacks"] == [awaits("p", "p:1")]


def scenario_register_callback_twice_records_the_awaiter_once(m: Machine) -> None:
    """P-04-promise.register_callback: ``addCallback`` deduplicates."""
    spawn(m, "p", 100_000, now=0)
    plain(m, "p:1", 50_000, now=0)
    ok(m, "promise.register_callback", callback("p:1", "p"), 10)
    ok(m, "promise.register_callback", callback("p:1", "p"), 11)
    assert snap(m)["callbacks"] == [awaits("p", "p:1")]


def scenario_register_callback_ignores_a_dead_awaiter(m: Machine) -> None:
    """P-04-promise.register_callback: awaited live, awaiter past its deadline → 200, no
    write."""
    spawn(m, "p", 1000, now=0)
    plain(m, "p:1", 50_000, now=0)
    body = ok(m, "promise.register_callback", callback("p:1", "p"), 1000)
    assert body == {"promise": promise("p:1", "pending", 50_000, 0)}
    assert snap(m)["callbacks"] == []


def scenario_register_callback_ignores_a_settled_awaiter(m: Machine) -> None:
    """P-04-promise.register_callback: awaiter not pending → 200, no write."""
    spawn(m, "p", 100_000, now=0)
    plain(m, "p:1", 50_000, now=0)
    ok(m, "promise.settle", settle("p", "resolved"), 5)
    ok(m, "promise.register_callback", callback("p:1", "p"), 10)
    assert snap(m)["callbacks"] == []


def scenario_register_callback_on_a_dead_awaited_answers_the_projection(m: Machine) -> None:
    """P-04-promise.register_callback: awaited dead → projected record, no write."""
    spawn(m, "p", 100_000, now=0)
    plain(m, "p:1", 1000, now=0)
    before = snap(m)
    body = ok(m, "promise.register_callback", callback("p:1", "p"), 1000)
    assert body == {"promise": promise("p:1", "rejected_timedout", 1000, 0, settled_at=1000)}
    assert snap(m) == before


def scenario_register_callback_on_a_settled_awaited_writes_nothing(m: Machine) -> None:
    """P-04-promise.register_callback: awaited settled → stored record; Lean does not resume
    the awaiter (no direct resume)."""
    claim(m, "p", 100_000, now=0)
    plain(m, "p:1", 50_000, now=0)
    ok(m, "promise.settle", settle("p:1", "resolved"), 5)
    before = snap(m)
    body = ok(m, "promise.register_callback", callback("p:1", "p"), 10)
    assert body == {"promise": promise("p:1", "resolved", 50_000, 0, settled_at=5)}
    assert snap(m) == before
    assert before["tasks"] == [leased("p", 1)]


# -- P-05 promise.register_listener ---------------------------------------------------------


def scenario_register_listener_answers_404_when_the_awaited_is_missing(m: Machine) -> None:
    """P-05-promise.register_listener: awaited absent → 404."""
    assert status(m, "promise.register_listener", listen("p", L1), 0) == 404


def scenario_register_listener_adds_addresses_once_in_order(m: Machine) -> None:
    """P-05-promise.register_listener: live → ``addListener`` (dedup, order kept)."""
    plain(m, "p", 1000, now=0)
    body = ok(m, "promise.register_listener", listen("p", L2), 1)
    assert body == {"promise": promise("p", "pending", 1000, 0)}
    ok(m, "promise.register_listener", listen("p", L1), 2)
    ok(m, "promise.register_listener", listen("p", L2), 3)
    assert snap(m)["listeners"] == [listener("p", L1), listener("p", L2)]
    ok(m, "promise.settle", settle("p"), 4)
    record = promise("p", "resolved", 1000, 0, settled_at=4)
    assert snap(m)["messages"] == [unblock(L1, record), unblock(L2, record)]


def scenario_register_listener_on_a_dead_promise_answers_the_projection(m: Machine) -> None:
    """P-05-promise.register_listener: dead → projected record, no listener."""
    plain(m, "p", 1000, now=0, timer="true")
    body = ok(m, "promise.register_listener", listen("p", L1), 1000)
    assert body == {"promise": promise("p", "resolved", 1000, 0, tags=TIMER, settled_at=1000)}
    assert snap(m)["listeners"] == []


def scenario_register_listener_on_a_settled_promise_sends_nothing(m: Machine) -> None:
    """P-05-promise.register_listener: settled → stored record; no listener, no unblock."""
    plain(m, "p", 1000, now=0)
    ok(m, "promise.settle", settle("p", "rejected"), 1)
    body = ok(m, "promise.register_listener", listen("p", L1), 2)
    assert body == {"promise": promise("p", "rejected", 1000, 0, settled_at=1)}
    assert snap(m) == state(promises=[promise("p", "rejected", 1000, 0, settled_at=1)])
