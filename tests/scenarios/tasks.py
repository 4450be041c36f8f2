"""Scenarios for the task handlers: T-01..T-10 of ``02-actions``.

The guard shared by acquire, fence, suspend, fulfill and release is exercised step by step
for each of them: task missing (404), wrong task state, promise dead, version mismatch (409).
Its "promise missing" step cannot be reached through the protocol (every task is created
with its promise); tests/oracle/test_branches.py covers it on the oracle directly.
"""

from __future__ import annotations

from .build import (
    L1,
    TARGETED,
    TIMER,
    TTL,
    VERSION,
    Machine,
    R,
    acquire,
    awaits,
    call,
    callback,
    claim,
    create,
    execute,
    fence,
    fulfill,
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
    status,
    suspend,
    task,
    task_create,
    task_id,
    timeout,
    unblock,
)

# -- T-01 task.get --------------------------------------------------------------------------


def scenario_task_get_answers_404_for_an_unknown_task(m: Machine) -> None:
    """T-01-task.get: ``getTask`` is none → 404."""
    assert status(m, "task.get", task_id("p"), 0) == 404


def scenario_task_get_answers_a_live_task_as_stored(m: Machine) -> None:
    """T-01-task.get: promise pending and live → the stored task."""
    claim(m, "p", 100_000, now=0)
    assert ok(m, "task.get", task_id("p"), 5) == {"task": leased("p", 1)}


def scenario_task_get_shows_the_task_of_a_dead_promise_as_fulfilled(m: Machine) -> None:
    """T-01-task.get: promise dead → fulfilled, pid/ttl dropped, version kept; no write."""
    claim(m, "p", 1000, now=0)
    assert ok(m, "task.get", task_id("p"), 1000) == {"task": task("p", "fulfilled", 1)}
    assert snap(m)["tasks"] == [leased("p", 1)]


def scenario_task_get_answers_the_task_of_a_settled_promise_as_fulfilled(m: Machine) -> None:
    """T-01-task.get: promise settled → fulfilled."""
    spawn(m, "p", 100_000, now=0)
    ok(m, "promise.settle", settle("p"), 1)
    assert ok(m, "task.get", task_id("p"), 2) == {"task": task("p", "fulfilled", 0)}


# -- T-02 task.create -----------------------------------------------------------------------


def scenario_task_create_makes_a_promise_and_an_acquired_task(m: Machine) -> None:
    """T-02-task.create: promise absent, live → pending promise with timeout, task acquired
    v1 with the lease at now+ttl; no execute."""
    body = ok(m, "task.create", task_create("p", 100_000), 3)
    record = promise("p", "pending", 100_000, 3, tags=TARGETED)
    assert body == {"promise": record, "preload": [], "task": leased("p", 1)}
    assert snap(m) == state(
        promises=[record],
        promiseTimeouts=[timeout("p", 100_000)],
        tasks=[leased("p", 1)],
        taskTimeouts=[lease("p", 3 + TTL)],
    )


def scenario_task_create_past_deadline_makes_a_fulfilled_task(m: Machine) -> None:
    """T-02-task.create: promise absent, dead → rejected_timedout (created = settled =
    timeoutAt) and a fulfilled task v0."""
    body = ok(m, "task.create", task_create("p", 1000), 1000)
    record = promise("p", "rejected_timedout", 1000, 1000, tags=TARGETED, settled_at=1000)
    assert body == {"promise": record, "preload": [], "task": task("p", "fulfilled", 0)}
    assert snap(m) == state(promises=[record], tasks=[task("p", "fulfilled", 0)])


def scenario_task_create_past_deadline_timer_is_resolved(m: Machine) -> None:
    """T-02-task.create: a dead-born timer is resolved."""
    tags = {**TARGETED, **TIMER}
    body = ok(m, "task.create", task_create("p", 1000, tags), 5000)
    assert body["promise"] == promise("p", "resolved", 1000, 1000, tags=tags, settled_at=1000)


def scenario_task_create_on_an_untargeted_promise_answers_422(m: Machine) -> None:
    """T-02-task.create: promise exists without ``resonate:target`` → 422."""
    plain(m, "p", 100_000, now=0)
    assert status(m, "task.create", task_create("p", 100_000), 1) == 422
    assert snap(m) == state(promises=[promise("p", "pending", 100_000, 0)])


def scenario_task_create_on_a_fulfilled_task_answers_it_as_stored(m: Machine) -> None:
    """T-02-task.create: existing task fulfilled → 200 with the stored task and promise."""
    spawn(m, "p", 100_000, now=0)
    ok(m, "promise.settle", settle("p", "rejected"), 5)
    body = ok(m, "task.create", task_create("p", 100_000), 10)
    record = promise("p", "rejected", 100_000, 0, tags=TARGETED, settled_at=5)
    assert body == {"promise": record, "preload": [], "task": task("p", "fulfilled", 0)}


def scenario_task_create_acquires_an_existing_pending_task(m: Machine) -> None:
    """T-02-task.create: existing pending task → acquired v+1 with ttl/pid; the retry is
    replaced by a lease at now+ttl."""
    spawn(m, "p", 100_000, now=0)
    body = ok(m, "task.create", task_create("p", 100_000), 100)
    record = promise("p", "pending", 100_000, 0, tags=TARGETED)
    assert body == {"promise": record, "preload": [], "task": leased("p", 1)}
    s = snap(m)
    assert s["tasks"] == [leased("p", 1)]
    assert s["taskTimeouts"] == [lease("p", 100 + TTL)]
    assert s["messages"] == [execute("p", 0)]


def scenario_task_create_reacquires_a_dead_pending_task_unprojected(m: Machine) -> None:
    """T-02-task.create: the pending branch does not check the deadline; the stored (pending)
    promise is served."""
    spawn(m, "p", 1000, now=0)
    body = ok(m, "task.create", task_create("p", 1000), 2000)
    assert body["promise"] == promise("p", "pending", 1000, 0, tags=TARGETED)
    assert body["task"] == leased("p", 1)
    assert snap(m)["taskTimeouts"] == [lease("p", 2000 + TTL)]


def scenario_task_create_on_an_acquired_task_answers_409(m: Machine) -> None:
    """T-02-task.create: existing task acquired → 409."""
    claim(m, "p", 100_000, now=0)
    assert status(m, "task.create", task_create("p", 100_000), 1) == 409


def scenario_task_create_on_a_suspended_task_answers_409(m: Machine) -> None:
    """T-02-task.create: existing task suspended → 409."""
    claim(m, "p", 100_000, now=0)
    plain(m, "p:1", 100_000, now=0)
    park(m, "p", 1, 1, "p:1")
    assert status(m, "task.create", task_create("p", 100_000), 2) == 409


def scenario_task_create_on_a_halted_task_answers_409(m: Machine) -> None:
    """T-02-task.create: existing task halted → 409."""
    spawn(m, "p", 100_000, now=0)
    ok(m, "task.halt", task_id("p"), 1)
    assert status(m, "task.create", task_create("p", 100_000), 2) == 409


# -- T-03 task.acquire ----------------------------------------------------------------------


def scenario_task_acquire_answers_404_for_an_unknown_task(m: Machine) -> None:
    """T-03-task.acquire: guard step 1, task absent → 404."""
    assert status(m, "task.acquire", acquire("p", 0), 0) == 404


def scenario_task_acquire_of_an_acquired_task_answers_409(m: Machine) -> None:
    """T-03-task.acquire: guard step 3, ``t.state != pending`` → 409."""
    claim(m, "p", 100_000, now=0)
    assert status(m, "task.acquire", acquire("p", 1), 1) == 409


def scenario_task_acquire_of_a_dead_task_answers_409(m: Machine) -> None:
    """T-03-task.acquire: guard step 4, promise past its deadline → 409, no write."""
    spawn(m, "p", 1000, now=0)
    before = snap(m)
    assert status(m, "task.acquire", acquire("p", 0), 1000) == 409
    assert snap(m) == before


def scenario_task_acquire_with_a_stale_version_answers_409(m: Machine) -> None:
    """T-03-task.acquire: guard step 5, ``t.version != req.version`` → 409."""
    spawn(m, "p", 100_000, now=0)
    assert status(m, "task.acquire", acquire("p", 1), 1) == 409


def scenario_task_acquire_takes_a_pending_task(m: Machine) -> None:
    """T-03-task.acquire: version+1, ttl, pid, resumes cleared; retry replaced by a lease."""
    spawn(m, "p", 100_000, now=0)
    body = ok(m, "task.acquire", acquire("p", 0), 100)
    record = promise("p", "pending", 100_000, 0, tags=TARGETED)
    assert body == {"promise": record, "preload": [], "task": leased("p", 1)}
    assert snap(m) == state(
        promises=[record],
        promiseTimeouts=[timeout("p", 100_000)],
        tasks=[leased("p", 1)],
        taskTimeouts=[lease("p", 100 + TTL)],
        messages=[execute("p", 0)],
    )


# -- T-04 task.fence ------------------------------------------------------------------------


def _inner(kind: str, status: int, data: object) -> dict:
    head = {"corrId": "sc-task.fence", "status": status, "version": VERSION}
    return {"kind": kind, "head": head, "data": data}


def scenario_task_fence_answers_404_for_an_unknown_task(m: Machine) -> None:
    """T-04-task.fence: guard step 1 → 404; the action does not run."""
    data = fence("p", 1, "promise.create", create("p:1", 50_000))
    assert status(m, "task.fence", data, 0) == 404
    assert snap(m) == state()


def scenario_task_fence_of_a_pending_task_answers_409(m: Machine) -> None:
    """T-04-task.fence: guard step 3, task not acquired → 409; the action does not run."""
    spawn(m, "p", 100_000, now=0)
    data = fence("p", 0, "promise.create", create("p:1", 50_000))
    assert status(m, "task.fence", data, 1) == 409
    assert [p["id"] for p in snap(m)["promises"]] == ["p"]


def scenario_task_fence_of_a_dead_task_answers_409(m: Machine) -> None:
    """T-04-task.fence: guard step 4, task promise dead → 409."""
    claim(m, "p", 1000, now=0)
    data = fence("p", 1, "promise.create", create("p:1", 50_000))
    assert status(m, "task.fence", data, 1000) == 409


def scenario_task_fence_with_a_stale_version_answers_409(m: Machine) -> None:
    """T-04-task.fence: guard step 5, version mismatch → 409."""
    claim(m, "p", 100_000, now=0)
    data = fence("p", 0, "promise.settle", settle("p:1"))
    assert status(m, "task.fence", data, 1) == 409


def scenario_task_fence_runs_promise_create(m: Machine) -> None:
    """T-04-task.fence: ``.create r`` → P-02 at the same now; a targeted child gets its task,
    retry and execute."""
    claim(m, "p", 100_000, now=0)
    data = fence("p", 1, "promise.create", create("p:1", 50_000, TARGETED))
    body = ok(m, "task.fence", data, 10)
    child = promise("p:1", "pending", 50_000, 10, tags=TARGETED)
    assert body == {"action": _inner("promise.create", 200, {"promise": child}), "preload": []}
    s = snap(m)
    assert s["promiseTimeouts"] == [timeout("p", 100_000), timeout("p:1", 50_000)]
    assert s["tasks"] == [leased("p", 1), task("p:1", "pending", 0)]
    assert s["taskTimeouts"] == [lease("p", TTL), retry("p:1", 10 + R)]
    assert s["messages"] == [execute("p:1", 0)]


def scenario_task_fence_runs_promise_settle(m: Machine) -> None:
    """T-04-task.fence: ``.settle r`` → P-03 at the same now."""
    claim(m, "p", 100_000, now=0)
    plain(m, "p:1", 50_000, now=0)
    body = ok(m, "task.fence", fence("p", 1, "promise.settle", settle("p:1", "rejected")), 10)
    settled = promise("p:1", "rejected", 50_000, 0, settled_at=10)
    assert body == {"action": _inner("promise.settle", 200, {"promise": settled}), "preload": []}


def scenario_task_fence_carries_the_inner_404_inside_a_200(m: Machine) -> None:
    """T-04-task.fence: the inner response keeps its own status (settle of a missing
    promise → 404) while the fence answers 200."""
    claim(m, "p", 100_000, now=0)
    body = ok(m, "task.fence", fence("p", 1, "promise.settle", settle("p:1")), 10)
    assert body == {"action": _inner("promise.settle", 404, "Promise not found"), "preload": []}


# -- T-05 task.heartbeat --------------------------------------------------------------------


def scenario_task_heartbeat_extends_a_held_lease(m: Machine) -> None:
    """T-05-task.heartbeat: acquired, same version, same pid, promise live → lease moved to
    now + ttl."""
    claim(m, "p", 100_000, now=0)
    assert ok(m, "task.heartbeat", heartbeat(ref("p", 1)), 5000) == {}
    assert snap(m)["taskTimeouts"] == [lease("p", 5000 + TTL)]


def scenario_task_heartbeat_ignores_an_unknown_task(m: Machine) -> None:
    """T-05-task.heartbeat: ``getTask`` none → skipped; still 200."""
    assert ok(m, "task.heartbeat", heartbeat(ref("x", 1)), 5) == {}
    assert snap(m) == state()


def scenario_task_heartbeat_ignores_another_process(m: Machine) -> None:
    """T-05-task.heartbeat: ``t.pid != req.pid`` → lease unchanged."""
    claim(m, "p", 100_000, now=0)
    ok(m, "task.heartbeat", heartbeat(ref("p", 1), pid="worker-2"), 5000)
    assert snap(m)["taskTimeouts"] == [lease("p", TTL)]


def scenario_task_heartbeat_ignores_a_stale_version(m: Machine) -> None:
    """T-05-task.heartbeat: ``t.version != ref.version`` → lease unchanged."""
    claim(m, "p", 100_000, now=0)
    ok(m, "task.heartbeat", heartbeat(ref("p", 0)), 5000)
    assert snap(m)["taskTimeouts"] == [lease("p", TTL)]


def scenario_task_heartbeat_ignores_a_task_that_is_not_acquired(m: Machine) -> None:
    """T-05-task.heartbeat: task pending → its retry is left alone, no lease armed."""
    spawn(m, "p", 100_000, now=0)
    ok(m, "task.heartbeat", heartbeat(ref("p", 0)), 1000)
    assert snap(m)["taskTimeouts"] == [retry("p", R)]


def scenario_task_heartbeat_ignores_a_task_whose_promise_is_dead(m: Machine) -> None:
    """T-05-task.heartbeat: promise past its deadline → lease unchanged."""
    claim(m, "p", 3000, now=0)
    ok(m, "task.heartbeat", heartbeat(ref("p", 1)), 3000)
    assert snap(m)["taskTimeouts"] == [lease("p", TTL)]


def scenario_task_heartbeat_with_no_tasks_answers_200(m: Machine) -> None:
    """T-05-task.heartbeat: the loop runs zero times → 200."""
    assert ok(m, "task.heartbeat", heartbeat(), 0) == {}


def scenario_task_heartbeat_judges_each_task_on_its_own(m: Machine) -> None:
    """T-05-task.heartbeat: one extended, one (stale version) not, one unknown skipped."""
    claim(m, "a", 100_000, now=0)
    claim(m, "b", 100_000, now=0)
    ok(m, "task.heartbeat", heartbeat(ref("a", 1), ref("b", 7), ref("c", 1)), 4000)
    assert snap(m)["taskTimeouts"] == [lease("a", 4000 + TTL), lease("b", TTL)]


# -- T-06 task.suspend ----------------------------------------------------------------------


def scenario_task_suspend_answers_404_for_an_unknown_task(m: Machine) -> None:
    """T-06-task.suspend: guard step 1 → 404."""
    assert status(m, "task.suspend", suspend("p", 1, "p:1"), 0) == 404


def scenario_task_suspend_of_a_pending_task_answers_409(m: Machine) -> None:
    """T-06-task.suspend: guard step 3, task not acquired → 409."""
    spawn(m, "p", 100_000, now=0)
    plain(m, "p:1", 100_000, now=0)
    assert status(m, "task.suspend", suspend("p", 0, "p:1"), 1) == 409
    assert snap(m)["callbacks"] == []


def scenario_task_suspend_of_a_dead_task_answers_409(m: Machine) -> None:
    """T-06-task.suspend: guard step 4, task promise dead → 409."""
    claim(m, "p", 1000, now=0)
    plain(m, "p:1", 100_000, now=0)
    assert status(m, "task.suspend", suspend("p", 1, "p:1"), 1000) == 409


def scenario_task_suspend_with_a_stale_version_answers_409(m: Machine) -> None:
    """T-06-task.suspend: guard step 5, version mismatch → 409."""
    claim(m, "p", 100_000, now=0)
    plain(m, "p:1", 100_000, now=0)
    assert status(m, "task.suspend", suspend("p", 2, "p:1"), 1) == 409


def scenario_task_suspend_on_a_missing_promise_answers_422(m: Machine) -> None:
    """T-06-task.suspend: awaited absent → 422, no writes."""
    claim(m, "p", 100_000, now=0)
    before = snap(m)
    assert status(m, "task.suspend", suspend("p", 1, "p:1"), 1) == 422
    assert snap(m) == before


def scenario_task_suspend_reports_a_later_missing_promise_over_a_settled_one(m: Machine) -> None:
    """T-06-task.suspend: the scan goes on after a settled awaited; a later missing one still
    answers 422."""
    claim(m, "p", 100_000, now=0)
    plain(m, "p:1", 100_000, now=0)
    ok(m, "promise.settle", settle("p:1"), 1)
    assert status(m, "task.suspend", suspend("p", 1, "p:1", "p:2"), 2) == 422


def scenario_task_suspend_on_a_settled_promise_answers_300(m: Machine) -> None:
    """T-06-task.suspend: an awaited promise settled → 300; task stays acquired with its
    lease; buffered resumes are dropped; no callback registered."""
    claim(m, "p", 100_000, now=0)
    plain(m, "p:1", 100_000, now=0)
    plain(m, "p:2", 100_000, now=0)
    ok(m, "promise.register_callback", callback("p:1", "p"), 1)
    ok(m, "promise.settle", settle("p:1"), 2)
    assert snap(m)["tasks"] == [leased("p", 1, resumes=1)]
    assert call(m, "task.suspend", suspend("p", 1, "p:2", "p:1"), 3) == (300, {"preload": []})
    s = snap(m)
    assert s["tasks"] == [leased("p", 1)]
    assert s["taskTimeouts"] == [lease("p", TTL)]
    assert s["callbacks"] == []


def scenario_task_suspend_on_a_dead_promise_answers_300(m: Machine) -> None:
    """T-06-task.suspend: an awaited promise past its deadline counts as settled → 300."""
    claim(m, "p", 100_000, now=0)
    plain(m, "p:1", 1000, now=0)
    assert call(m, "task.suspend", suspend("p", 1, "p:1"), 1000) == (300, {"preload": []})
    assert snap(m)["tasks"] == [leased("p", 1)]


def scenario_task_suspend_parks_the_task_on_pending_promises(m: Machine) -> None:
    """T-06-task.suspend: all pending → ``addCallback`` on each awaited, task suspended with
    pid/ttl/resumes cleared, lease deleted."""
    claim(m, "p", 100_000, now=0)
    plain(m, "p:1", 100_000, now=0)
    plain(m, "p:2", 100_000, now=0)
    assert ok(m, "task.suspend", suspend("p", 1, "p:1", "p:2"), 5) == {}
    s = snap(m)
    assert s["callbacks"] == [awaits("p", "p:1"), awaits("p", "p:2")]
    assert s["tasks"] == [task("p", "suspended", 1)]
    assert s["taskTimeouts"] == []


def scenario_task_suspend_on_the_same_promise_twice_registers_once(m: Machine) -> None:
    """T-06-task.suspend: duplicates are absorbed by ``addCallback``."""
    claim(m, "p", 100_000, now=0)
    plain(m, "p:1", 100_000, now=0)
    park(m, "p", 1, 5, "p:1", "p:1")
    assert snap(m)["callbacks"] == [awaits("p", "p:1")]


# -- T-07 task.fulfill ----------------------------------------------------------------------


def scenario_task_fulfill_answers_404_for_an_unknown_task(m: Machine) -> None:
    """T-07-task.fulfill: guard step 1 → 404."""
    assert status(m, "task.fulfill", fulfill("p", 1), 0) == 404


def scenario_task_fulfill_of_a_pending_task_answers_409(m: Machine) -> None:
    """T-07-task.fulfill: guard step 3 → 409; the promise stays pending."""
    spawn(m, "p", 100_000, now=0)
    assert status(m, "task.fulfill", fulfill("p", 0), 1) == 409
    assert snap(m)["promises"][0]["state"] == "pending"


def scenario_task_fulfill_of_a_dead_task_answers_409(m: Machine) -> None:
    """T-07-task.fulfill: guard step 4 → 409."""
    claim(m, "p", 1000, now=0)
    assert status(m, "task.fulfill", fulfill("p", 1), 1000) == 409


def scenario_task_fulfill_with_a_stale_version_answers_409(m: Machine) -> None:
    """T-07-task.fulfill: guard step 5 → 409."""
    claim(m, "p", 100_000, now=0)
    assert status(m, "task.fulfill", fulfill("p", 0), 1) == 409


def scenario_task_fulfill_settles_the_promise_and_fulfils_the_task(m: Machine) -> None:
    """T-07-task.fulfill: promise settled at now with the value; timeouts deleted; task
    fulfilled (pid/ttl cleared, version kept)."""
    claim(m, "p", 100_000, now=0)
    body = ok(m, "task.fulfill", fulfill("p", 1, "resolved", {"data": "b2s="}), 50)
    record = promise(
        "p", "resolved", 100_000, 0, tags=TARGETED, settled_at=50, value={"data": "b2s="}
    )
    assert body == {"promise": record}
    assert snap(m) == state(promises=[record], tasks=[task("p", "fulfilled", 1)])


def scenario_task_fulfill_unblocks_the_listeners(m: Machine) -> None:
    """T-07-task.fulfill: one unblock per listener, carrying the settled record."""
    claim(m, "p", 100_000, now=0)
    ok(m, "promise.register_listener", listen("p", L1), 1)
    ok(m, "task.fulfill", fulfill("p", 1, "rejected"), 2)
    record = promise("p", "rejected", 100_000, 0, tags=TARGETED, settled_at=2)
    s = snap(m)
    assert s["messages"] == [unblock(L1, record)]
    assert s["listeners"] == []


def scenario_task_fulfill_scrubs_the_task_from_pending_callbacks(m: Machine) -> None:
    """T-07-task.fulfill: settlement scrub — the fulfilled task's registration as an awaiter
    is dropped from every pending promise."""
    claim(m, "p", 100_000, now=0)
    plain(m, "p:1", 100_000, now=0)
    ok(m, "promise.register_callback", callback("p:1", "p"), 1)
    ok(m, "task.fulfill", fulfill("p", 1), 2)
    assert snap(m)["callbacks"] == []


# -- T-08 task.release ----------------------------------------------------------------------


def scenario_task_release_answers_404_for_an_unknown_task(m: Machine) -> None:
    """T-08-task.release: guard step 1 → 404."""
    assert status(m, "task.release", task_id("p", 1), 0) == 404


def scenario_task_release_of_a_pending_task_answers_409(m: Machine) -> None:
    """T-08-task.release: guard step 3 → 409."""
    spawn(m, "p", 100_000, now=0)
    assert status(m, "task.release", task_id("p", 0), 1) == 409


def scenario_task_release_of_a_dead_task_answers_409(m: Machine) -> None:
    """T-08-task.release: guard step 4 → 409."""
    claim(m, "p", 1000, now=0)
    assert status(m, "task.release", task_id("p", 1), 1000) == 409


def scenario_task_release_with_a_stale_version_answers_409(m: Machine) -> None:
    """T-08-task.release: guard step 5 → 409."""
    claim(m, "p", 100_000, now=0)
    assert status(m, "task.release", task_id("p", 0), 1) == 409


def scenario_task_release_returns_the_task_to_pending(m: Machine) -> None:
    """T-08-task.release: pending, version kept, pid/ttl cleared; lease replaced by a retry at
    now+R; execute at the current version."""
    claim(m, "p", 100_000, now=0)
    assert ok(m, "task.release", task_id("p", 1), 100) == {}
    s = snap(m)
    assert s["tasks"] == [task("p", "pending", 1)]
    assert s["taskTimeouts"] == [retry("p", 100 + R)]
    assert s["messages"] == [execute("p", 1)]


def scenario_task_release_keeps_buffered_resumes(m: Machine) -> None:
    """T-08-task.release: ``resumes`` is not touched."""
    claim(m, "p", 100_000, now=0)
    plain(m, "p:1", 100_000, now=0)
    ok(m, "promise.register_callback", callback("p:1", "p"), 1)
    ok(m, "promise.settle", settle("p:1"), 2)
    ok(m, "task.release", task_id("p", 1), 3)
    assert snap(m)["tasks"] == [task("p", "pending", 1, resumes=1)]


# -- T-09 task.halt -------------------------------------------------------------------------


def scenario_task_halt_answers_404_for_an_unknown_task(m: Machine) -> None:
    """T-09-task.halt: task absent → 404."""
    assert status(m, "task.halt", task_id("p"), 0) == 404


def scenario_task_halt_of_a_fulfilled_task_answers_409(m: Machine) -> None:
    """T-09-task.halt: fulfilled → 409."""
    spawn(m, "p", 100_000, now=0)
    ok(m, "promise.settle", settle("p"), 1)
    assert status(m, "task.halt", task_id("p"), 2) == 409


def scenario_task_halt_of_a_halted_task_changes_nothing(m: Machine) -> None:
    """T-09-task.halt: already halted → 200, no write."""
    spawn(m, "p", 100_000, now=0)
    ok(m, "task.halt", task_id("p"), 1)
    before = snap(m)
    assert ok(m, "task.halt", task_id("p"), 2) == {}
    assert snap(m) == before


def scenario_task_halt_halts_a_pending_task_and_drops_its_retry(m: Machine) -> None:
    """T-09-task.halt: pending → halted, ``delTaskTimeout``; the sent execute stays."""
    spawn(m, "p", 100_000, now=0)
    assert ok(m, "task.halt", task_id("p"), 1) == {}
    s = snap(m)
    assert s["tasks"] == [task("p", "halted", 0)]
    assert s["taskTimeouts"] == []
    assert s["messages"] == [execute("p", 0)]


def scenario_task_halt_halts_an_acquired_task_and_drops_its_lease(m: Machine) -> None:
    """T-09-task.halt: acquired → halted with pid/ttl cleared, version kept, lease deleted."""
    claim(m, "p", 100_000, now=0)
    ok(m, "task.halt", task_id("p"), 1)
    s = snap(m)
    assert s["tasks"] == [task("p", "halted", 1)]
    assert s["taskTimeouts"] == []


def scenario_task_halt_of_a_suspended_task_keeps_its_callbacks(m: Machine) -> None:
    """T-09-task.halt: suspended → halted; its callbacks stay registered."""
    claim(m, "p", 100_000, now=0)
    plain(m, "p:1", 100_000, now=0)
    park(m, "p", 1, 1, "p:1")
    ok(m, "task.halt", task_id("p"), 2)
    s = snap(m)
    assert s["tasks"] == [task("p", "halted", 1)]
    assert s["callbacks"] == [awaits("p", "p:1")]


def scenario_task_halt_halts_a_task_whose_promise_is_dead(m: Machine) -> None:
    """T-09-task.halt: the promise is not read, so a dead task is halted too."""
    spawn(m, "p", 1000, now=0)
    assert ok(m, "task.halt", task_id("p"), 2000) == {}
    assert snap(m)["tasks"] == [task("p", "halted", 0)]


# -- T-10 task.continue ---------------------------------------------------------------------


def scenario_task_continue_answers_404_for_an_unknown_task(m: Machine) -> None:
    """T-10-task.continue: task absent → 404."""
    assert status(m, "task.continue", task_id("p"), 0) == 404


def scenario_task_continue_of_a_task_that_is_not_halted_answers_409(m: Machine) -> None:
    """T-10-task.continue: ``t.state != halted`` → 409."""
    claim(m, "p", 100_000, now=0)
    assert status(m, "task.continue", task_id("p"), 1) == 409


def scenario_task_continue_returns_a_halted_task_to_pending(m: Machine) -> None:
    """T-10-task.continue: pending (version kept), retry at now+R, execute."""
    claim(m, "p", 100_000, now=0)
    ok(m, "task.halt", task_id("p"), 10)
    assert ok(m, "task.continue", task_id("p"), 20) == {}
    s = snap(m)
    assert s["tasks"] == [task("p", "pending", 1)]
    assert s["taskTimeouts"] == [retry("p", 20 + R)]
    assert s["messages"] == [execute("p", 1)]


def scenario_task_continue_keeps_buffered_resumes(m: Machine) -> None:
    """T-10-task.continue: ``{ t with state := .pending }`` keeps resumes."""
    claim(m, "p", 100_000, now=0)
    plain(m, "p:1", 100_000, now=0)
    ok(m, "promise.register_callback", callback("p:1", "p"), 1)
    ok(m, "task.halt", task_id("p"), 2)
    ok(m, "promise.settle", settle("p:1"), 3)
    ok(m, "task.continue", task_id("p"), 4)
    assert snap(m)["tasks"] == [task("p", "pending", 1, resumes=1)]


def scenario_task_continue_dispatches_a_dead_task(m: Machine) -> None:
    """T-10-task.continue: no deadline check — a dead task is re-pended and sent."""
    spawn(m, "p", 1000, now=0)
    ok(m, "task.halt", task_id("p"), 10)
    ok(m, "task.continue", task_id("p"), 2000)
    s = snap(m)
    assert s["tasks"] == [task("p", "pending", 0)]
    assert s["taskTimeouts"] == [retry("p", 2000 + R)]
    assert s["messages"] == [execute("p", 0)]
