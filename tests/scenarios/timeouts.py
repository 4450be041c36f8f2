"""Scenarios for the timeout transitions, fired by ``debug.tick``.

The transitions are Lean's ``spec/02-actions/02-timeouts.lean``
(docs/references.md#the-abstract-machine).

``debug.tick`` (docs/semantics.md) fires every due entry earliest first, ties going promise
timeouts, then retries, then leases, then schedules, each at ``now = time``. The schedule
transition and ``catchUp`` are in ``schedules``.
"""

from __future__ import annotations

from .build import (
    L1,
    TARGETED,
    TIMER,
    TTL,
    Machine,
    R,
    callback,
    claim,
    create,
    execute,
    heartbeat,
    lease,
    leased,
    listen,
    ok,
    park,
    plain,
    promise,
    ref,
    retry,
    settle,
    snap,
    spawn,
    state,
    task,
    task_create,
    tick,
    timeout,
    unblock,
)

# -- onPromiseTimeout -----------------------------------------------------------------------


def scenario_promise_timeout_times_out_a_targeted_promise(m: Machine) -> None:
    """02-timeouts onPromiseTimeout: pending, not a timer → rejected_timedout at
    ``settledAt = timeoutAt``; timeout removed; task fulfilled; task timeouts removed."""
    spawn(m, "p", 1000, now=0)
    tick(m, 1000)
    assert snap(m) == state(
        promises=[promise("p", "rejected_timedout", 1000, 0, tags=TARGETED, settled_at=1000)],
        tasks=[task("p", "fulfilled", 0)],
        messages=[execute("p", 0)],
    )


def scenario_promise_timeout_resolves_a_timer_at_its_deadline(m: Machine) -> None:
    """02-timeouts onPromiseTimeout: a timer resolves; ``settledAt`` is the deadline, not the
    tick time."""
    plain(m, "p", 1000, now=0, timer="true")
    tick(m, 3000)
    assert snap(m) == state(
        promises=[promise("p", "resolved", 1000, 0, tags=TIMER, settled_at=1000)]
    )


def scenario_promise_timeout_resolves_a_targeted_timer_and_fulfils_its_task(m: Machine) -> None:
    """02-timeouts onPromiseTimeout: timer and target → resolved, task fulfilled."""
    tags = {**TARGETED, **TIMER}
    ok(m, "promise.create", create("p", 1000, tags), 0)
    tick(m, 1000)
    s = snap(m)
    assert s["promises"] == [promise("p", "resolved", 1000, 0, tags=tags, settled_at=1000)]
    assert s["tasks"] == [task("p", "fulfilled", 0)]


def scenario_tick_before_a_deadline_fires_nothing(m: Machine) -> None:
    """02-timeouts: an entry fires only once ``timeout ≤ time``."""
    spawn(m, "p", 1000, now=0)
    before = snap(m)
    tick(m, 999)
    assert snap(m) == before


def scenario_promise_timeout_unblocks_listeners_and_wakes_awaiters(m: Machine) -> None:
    """02-timeouts onPromiseTimeout: the tail sends unblocks with the timed-out record and
    resumes awaiters at the tick's now (retry at time+R)."""
    claim(m, "p", 100_000, now=0)
    plain(m, "p:1", 3000, now=0, timer="true")
    ok(m, "promise.register_listener", listen("p:1", L1), 1)
    park(m, "p", 1, 10, "p:1")
    tick(m, 4000)
    resolved = promise("p:1", "resolved", 3000, 0, tags=TIMER, settled_at=3000)
    assert snap(m) == state(
        promises=[promise("p", "pending", 100_000, 0, tags=TARGETED), resolved],
        promiseTimeouts=[timeout("p", 100_000)],
        tasks=[task("p", "pending", 1, resumes=1)],
        taskTimeouts=[retry("p", 4000 + R)],
        messages=[execute("p", 1), unblock(L1, resolved)],
    )


def scenario_promise_timeout_scrubs_the_timed_out_awaiter(m: Machine) -> None:
    """02-timeouts onPromiseTimeout: settlement scrub — the timed-out promise leaves every
    pending promise's callbacks."""
    spawn(m, "p", 1000, now=0)
    plain(m, "p:1", 100_000, now=0)
    ok(m, "promise.register_callback", callback("p:1", "p"), 1)
    tick(m, 1000)
    assert snap(m)["callbacks"] == []


def scenario_plain_promise_is_never_swept(m: Machine) -> None:
    """P-02-promise.create arms no timeout for an internal promise, so no tick settles it;
    only reads project it."""
    plain(m, "p", 1000, now=0)
    tick(m, 5000)
    assert snap(m) == state(promises=[promise("p", "pending", 1000, 0)])


# -- onTaskRetryTimeout ---------------------------------------------------------------------


def scenario_retry_timeout_resends_and_rearms(m: Machine) -> None:
    """02-timeouts onTaskRetryTimeout: pending → retry re-armed at now+R, execute again."""
    spawn(m, "p", 100_000, now=0)
    tick(m, 7000)
    s = snap(m)
    assert s["taskTimeouts"] == [retry("p", 7000 + R)]
    assert s["messages"] == [execute("p", 0)]
    assert s["tasks"] == [task("p", "pending", 0)]


def scenario_retry_timeout_sends_a_delayed_task_at_its_delay(m: Machine) -> None:
    """P-02 delay then onTaskRetryTimeout: the first execute goes out when the delay fires."""
    tags = {**TARGETED, "resonate:delay": "30000"}
    ok(m, "promise.create", create("p", 100_000, tags), 0)
    tick(m, 29_999)
    assert snap(m)["messages"] == []
    tick(m, 30_000)
    s = snap(m)
    assert s["messages"] == [execute("p", 0)]
    assert s["taskTimeouts"] == [retry("p", 30_000 + R)]


# -- onTaskLeaseTimeout ---------------------------------------------------------------------


def scenario_lease_timeout_returns_the_task_to_pending(m: Machine) -> None:
    """02-timeouts onTaskLeaseTimeout: acquired → pending (version kept, pid/ttl cleared),
    retry at now+R, execute at the current version."""
    claim(m, "p", 100_000, now=0)
    tick(m, TTL)
    assert snap(m) == state(
        promises=[promise("p", "pending", 100_000, 0, tags=TARGETED)],
        promiseTimeouts=[timeout("p", 100_000)],
        tasks=[task("p", "pending", 1)],
        taskTimeouts=[retry("p", TTL + R)],
        messages=[execute("p", 1)],
    )


def scenario_lease_timeout_keeps_buffered_resumes(m: Machine) -> None:
    """02-timeouts onTaskLeaseTimeout: ``{ t with state, pid, ttl }`` keeps resumes."""
    claim(m, "p", 100_000, now=0)
    plain(m, "p:1", 100_000, now=0)
    ok(m, "promise.register_callback", callback("p:1", "p"), 1)
    ok(m, "promise.settle", settle("p:1"), 2)
    tick(m, TTL)
    assert snap(m)["tasks"] == [task("p", "pending", 1, resumes=1)]


def scenario_heartbeat_keeps_the_lease_past_its_old_deadline(m: Machine) -> None:
    """T-05 then onTaskLeaseTimeout: an extended lease does not expire at the old deadline."""
    claim(m, "p", 100_000, now=0)
    ok(m, "task.heartbeat", heartbeat(ref("p", 1)), 5000)
    tick(m, TTL)
    s = snap(m)
    assert s["tasks"] == [leased("p", 1)]
    assert s["taskTimeouts"] == [lease("p", 5000 + TTL)]


# -- debug.tick order -----------------------------------------------------------------------


def scenario_tick_fires_an_earlier_lease_before_a_later_promise_timeout(m: Machine) -> None:
    """debug.tick order: lease (3000) before the promise timeout (6000). The lease re-pends
    and sends; the timeout then fulfils the task. Neither transition checks liveness."""
    ok(m, "task.create", task_create("p", 6000, ttl=3000), 0)
    tick(m, 10_000)
    assert snap(m) == state(
        promises=[promise("p", "rejected_timedout", 6000, 0, tags=TARGETED, settled_at=6000)],
        tasks=[task("p", "fulfilled", 1)],
        messages=[execute("p", 1)],
    )


def scenario_tick_fires_a_promise_timeout_before_a_lease_due_at_once(m: Machine) -> None:
    """debug.tick tie order: the promise timeout fires first, fulfils the task and deletes
    its lease, so no execute is sent."""
    ok(m, "task.create", task_create("p", 3000, ttl=3000), 0)
    tick(m, 3000)
    assert snap(m) == state(
        promises=[promise("p", "rejected_timedout", 3000, 0, tags=TARGETED, settled_at=3000)],
        tasks=[task("p", "fulfilled", 1)],
    )
