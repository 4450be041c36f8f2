"""The task handlers through the SQLite backend: guards, writes, timeouts, preload."""

from __future__ import annotations

from tests.engine.machine import TARGET, Machine, R, awaits, settle_action


def acquire(machine: Machine, id: str, version: int, now: int = 0, pid: str = "w2") -> tuple:
    return machine.call(
        "task.acquire", {"id": id, "version": version, "pid": pid, "ttl": 1000}, now
    )


def test_task_get_of_an_unknown_task_is_404(machine: Machine) -> None:
    assert machine.call("task.get", {"id": "x"})[0] == 404


def test_task_get_shows_a_task_whose_promise_is_dead_as_fulfilled(machine: Machine) -> None:
    machine.create_task("t", timeout_at=500, ttl=10_000)
    assert machine.ok("task.get", {"id": "t"}, 499)["task"] == {
        "id": "t",
        "state": "acquired",
        "version": 1,
        "resumes": 0,
        "ttl": 10_000,
        "pid": "w1",
    }
    assert machine.ok("task.get", {"id": "t"}, 500)["task"] == {
        "id": "t",
        "state": "fulfilled",
        "version": 1,
        "resumes": 0,
    }
    assert machine.snap()["tasks"][0]["state"] == "acquired"


def test_task_create_makes_an_acquired_task_with_a_lease_and_no_message(
    machine: Machine,
) -> None:
    body = machine.create_task("t", timeout_at=9000, now=100, ttl=700)
    assert body["task"] == {
        "id": "t",
        "state": "acquired",
        "version": 1,
        "resumes": 0,
        "ttl": 700,
        "pid": "w1",
    }
    assert body["promise"]["state"] == "pending" and body["preload"] == []
    snap = machine.snap()
    assert snap["promiseTimeouts"] == [{"id": "t", "timeout": 9000}]
    assert snap["taskTimeouts"] == [{"id": "t", "type": 1, "timeout": 800}]
    assert snap["messages"] == []


def test_task_create_born_dead_makes_a_fulfilled_task(machine: Machine) -> None:
    body = machine.create_task("t", timeout_at=50, now=100)
    assert body["task"] == {"id": "t", "state": "fulfilled", "version": 0, "resumes": 0}
    assert body["promise"]["state"] == "rejected_timedout"
    assert machine.snap()["taskTimeouts"] == []


def test_task_create_claims_the_pending_task_of_an_existing_promise(machine: Machine) -> None:
    machine.create("t", tags={"resonate:target": TARGET})
    body = machine.create_task("t", now=10, pid="w9", ttl=300)
    assert (body["task"]["state"], body["task"]["version"], body["task"]["pid"]) == (
        "acquired",
        1,
        "w9",
    )
    assert machine.snap()["taskTimeouts"] == [{"id": "t", "type": 1, "timeout": 310}]


def test_task_create_conflicts_with_a_held_task(machine: Machine) -> None:
    machine.create_task("t")
    action = {
        "kind": "promise.create",
        "head": {},
        "data": {"id": "t", "timeoutAt": 100_000, "tags": {"resonate:target": TARGET}},
    }
    assert machine.call("task.create", {"pid": "w2", "ttl": 5, "action": action})[0] == 409


def test_task_create_on_an_untargeted_promise_is_422(machine: Machine) -> None:
    machine.create("t")
    action = {
        "kind": "promise.create",
        "head": {},
        "data": {"id": "t", "timeoutAt": 100_000, "tags": {"resonate:target": TARGET}},
    }
    assert machine.call("task.create", {"pid": "w2", "ttl": 5, "action": action})[0] == 422


def test_task_create_of_a_fulfilled_task_answers_the_stored_records(machine: Machine) -> None:
    machine.create("t", tags={"resonate:target": TARGET})
    machine.ok("promise.settle", {"id": "t", "state": "resolved"}, 5)
    body = machine.create_task("t", now=6)
    assert body["task"]["state"] == "fulfilled" and body["preload"] == []


def test_acquire_guards_in_order(machine: Machine) -> None:
    assert acquire(machine, "none", 0)[0] == 404
    machine.create("t", timeout_at=1000, tags={"resonate:target": TARGET})
    assert acquire(machine, "t", 3)[0] == 409  # stale version
    assert acquire(machine, "t", 0, now=1000)[0] == 409  # promise dead
    status, body = acquire(machine, "t", 0, now=10)
    assert status == 200 and body["task"]["version"] == 1
    assert acquire(machine, "t", 1, now=11)[0] == 409  # no longer pending


def test_acquire_replaces_the_retry_with_a_lease(machine: Machine) -> None:
    machine.create("t", tags={"resonate:target": TARGET})
    acquire(machine, "t", 0, now=10)
    assert machine.snap()["taskTimeouts"] == [{"id": "t", "type": 1, "timeout": 1010}]


def test_acquire_preloads_the_settled_promises_of_the_branch(machine: Machine) -> None:
    branch = {"resonate:branch": "b"}
    machine.create("b", tags={"resonate:target": TARGET, **branch})
    machine.create("b:1", tags=branch)
    machine.create("b:2", tags=branch)
    machine.create("c", tags={"resonate:branch": "c"})
    for id in ("b:1", "c"):
        machine.ok("promise.settle", {"id": id, "state": "resolved"})
    status, body = acquire(machine, "b", 0, now=1)
    assert status == 200
    assert [p["id"] for p in body["preload"]] == ["b:1"]


def test_fence_runs_the_inner_create_while_the_task_is_held(machine: Machine) -> None:
    machine.create_task("f")
    action = {
        "kind": "promise.create",
        "head": {},
        "data": {"id": "f:1", "timeoutAt": 9000, "tags": {"resonate:target": TARGET}},
    }
    body = machine.ok("task.fence", {"id": "f", "version": 1, "action": action}, 5)
    assert body["action"]["head"]["status"] == 200
    assert body["action"]["data"]["promise"]["id"] == "f:1"
    assert [m["message"]["data"]["task"]["id"] for m in machine.snap()["messages"]] == ["f:1"]
    assert machine.call("task.fence", {"id": "f", "version": 2, "action": action})[0] == 409


def test_fence_answers_the_inner_404_inside_a_200(machine: Machine) -> None:
    machine.create_task("f")
    body = machine.ok("task.fence", {"id": "f", "version": 1, "action": settle_action("f:x")})
    assert body["action"]["head"]["status"] == 404


def test_fence_preload_includes_the_promise_it_just_settled(machine: Machine) -> None:
    machine.create_task("f", tags={"resonate:branch": "f"})
    machine.create("f:1", tags={"resonate:branch": "f"})
    body = machine.ok("task.fence", {"id": "f", "version": 1, "action": settle_action("f:1")})
    assert [p["id"] for p in body["preload"]] == ["f:1"]


def test_heartbeat_extends_only_the_leases_the_caller_holds(machine: Machine) -> None:
    machine.create_task("h.1", ttl=100)
    machine.create_task("h.2", ttl=100, pid="other")
    machine.create_task("h.3", ttl=100)
    refs = [{"id": "h.1", "version": 1}, {"id": "h.2", "version": 1}, {"id": "h.3", "version": 7}]
    machine.ok("task.heartbeat", {"pid": "w1", "tasks": [*refs, {"id": "none", "version": 0}]}, 50)
    leases = {t["id"]: t["timeout"] for t in machine.snap()["taskTimeouts"]}
    assert leases == {"h.1": 150, "h.2": 100, "h.3": 100}


def test_suspend_parks_the_task_on_its_awaited_promises(machine: Machine) -> None:
    machine.create_task("s")
    machine.create("s:1")
    machine.create("s:2")
    status, body = machine.call(
        "task.suspend", {"id": "s", "version": 1, "actions": awaits("s", "s:1", "s:2", "s:1")}
    )
    assert (status, body) == (200, {})
    snap = machine.snap()
    assert snap["tasks"] == [{"id": "s", "state": "suspended", "version": 1, "resumes": 0}]
    assert snap["taskTimeouts"] == []
    assert snap["callbacks"] == [
        {"awaiter": "s", "awaited": "s:1"},
        {"awaiter": "s", "awaited": "s:2"},
    ]


def test_suspend_on_a_settled_promise_answers_300_and_keeps_the_lease(machine: Machine) -> None:
    machine.create_task("s", tags={"resonate:branch": "s"})
    machine.create("s:1", tags={"resonate:branch": "s"})
    machine.create("s:2", timeout_at=50, tags={"resonate:branch": "s"})
    machine.ok("promise.settle", {"id": "s:1", "state": "resolved"})
    before = machine.snap()
    status, body = machine.call(
        "task.suspend", {"id": "s", "version": 1, "actions": awaits("s", "s:2", "s:1")}, 60
    )
    assert status == 300
    # Preload lists stored records: s:2 is dead but still pending in storage.
    assert [p["id"] for p in body["preload"]] == ["s:1"]
    assert machine.snap() == before


def test_suspend_on_a_missing_promise_is_422_even_after_a_settled_one(machine: Machine) -> None:
    machine.create_task("s")
    machine.create("s:1")
    machine.ok("promise.settle", {"id": "s:1", "state": "resolved"})
    status, _ = machine.call(
        "task.suspend", {"id": "s", "version": 1, "actions": awaits("s", "s:1", "s:none")}
    )
    assert status == 422


def test_suspend_300_drops_buffered_resumes(machine: Machine) -> None:
    machine.create_task("s")
    machine.create("s:1")
    machine.create("s:2")
    machine.ok("task.suspend", {"id": "s", "version": 1, "actions": awaits("s", "s:1", "s:2")})
    machine.ok("promise.settle", {"id": "s:1", "state": "resolved"}, 1)
    acquire(machine, "s", 1, now=2)
    machine.ok("promise.settle", {"id": "s:2", "state": "resolved"}, 3)
    assert machine.ok("task.get", {"id": "s"}, 3)["task"]["resumes"] == 1
    status, _ = machine.call(
        "task.suspend", {"id": "s", "version": 2, "actions": awaits("s", "s:2")}, 4
    )
    assert status == 300
    task = machine.ok("task.get", {"id": "s"}, 4)["task"]
    assert (task["state"], task["resumes"]) == ("acquired", 0)


def test_fulfill_of_a_task_whose_promise_is_dead_is_409(machine: Machine) -> None:
    machine.create_task("t", timeout_at=100)
    body = {"id": "t", "version": 1, "action": settle_action("t")}
    assert machine.call("task.fulfill", body, 100)[0] == 409
    assert machine.call("task.fulfill", body, 99)[0] == 200


def test_release_returns_the_task_to_pending_at_the_same_version(machine: Machine) -> None:
    machine.create_task("t")
    assert machine.call("task.release", {"id": "t", "version": 1}, 40) == (200, {})
    snap = machine.snap()
    assert snap["tasks"] == [{"id": "t", "state": "pending", "version": 1, "resumes": 0}]
    assert snap["taskTimeouts"] == [{"id": "t", "type": 0, "timeout": 40 + R}]
    assert [m["message"]["data"]["task"] for m in snap["messages"]] == [{"id": "t", "version": 1}]
    assert machine.call("task.release", {"id": "t", "version": 1}, 41)[0] == 409


def test_halt_and_continue(machine: Machine) -> None:
    assert machine.call("task.halt", {"id": "none"})[0] == 404
    machine.create_task("t")
    assert machine.call("task.continue", {"id": "t"})[0] == 409
    assert machine.call("task.halt", {"id": "t"}) == (200, {})
    assert machine.call("task.halt", {"id": "t"}) == (200, {})
    snap = machine.snap()
    assert snap["tasks"] == [{"id": "t", "state": "halted", "version": 1, "resumes": 0}]
    assert snap["taskTimeouts"] == []
    assert machine.call("task.continue", {"id": "t"}, 70) == (200, {})
    snap = machine.snap()
    assert snap["tasks"][0]["state"] == "pending"
    assert snap["taskTimeouts"] == [{"id": "t", "type": 0, "timeout": 70 + R}]
    assert len(snap["messages"]) == 1


def test_a_fulfilled_task_cannot_be_halted(machine: Machine) -> None:
    machine.create_task("t")
    machine.ok("task.fulfill", {"id": "t", "version": 1, "action": settle_action("t")})
    assert machine.call("task.halt", {"id": "t"})[0] == 409
