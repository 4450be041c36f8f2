"""The settlement chain: unblocks, resumes of awaiters, and the scrub."""

from __future__ import annotations

from tests.engine.machine import TARGET, Machine, R, awaits, settle_action


def suspended_on(machine: Machine, task: str, *awaited: str) -> None:
    """A task that holds version 1 and parks on ``awaited``."""
    machine.create_task(task)
    for child in awaited:
        machine.create(child)
    body = {"id": task, "version": 1, "actions": awaits(task, *awaited)}
    assert machine.call("task.suspend", body, 10)[0] == 200


def test_settling_an_awaited_promise_resumes_a_suspended_task(machine: Machine) -> None:
    suspended_on(machine, "r", "r:a", "r:b")
    machine.ok("promise.settle", {"id": "r:a", "state": "resolved"}, 20)
    snap = machine.snap()
    assert snap["tasks"][0] == {"id": "r", "state": "pending", "version": 1, "resumes": 1}
    assert {"id": "r", "type": 0, "timeout": 20 + R} in snap["taskTimeouts"]
    executes = [m for m in snap["messages"] if m["message"]["kind"] == "execute"]
    assert executes == [
        {
            "address": TARGET,
            "message": {"kind": "execute", "head": {}, "data": {"task": {"id": "r", "version": 1}}},
        }
    ]
    # The other awaited promise still holds its registration until it settles.
    assert snap["callbacks"] == [{"awaiter": "r", "awaited": "r:b"}]


def test_a_running_awaiter_only_records_the_resume_once(machine: Machine) -> None:
    suspended_on(machine, "r", "r:a", "r:b")
    machine.ok("promise.settle", {"id": "r:a", "state": "resolved"}, 20)
    machine.ok("task.acquire", {"id": "r", "version": 1, "pid": "w2", "ttl": 1000}, 21)
    machine.ok("promise.settle", {"id": "r:b", "state": "resolved"}, 22)
    task = machine.ok("task.get", {"id": "r"}, 23)["task"]
    assert (task["state"], task["version"], task["resumes"]) == ("acquired", 2, 1)
    assert [m["message"]["kind"] for m in machine.snap()["messages"]] == ["execute"]


def test_a_halted_awaiter_buffers_its_resumes(machine: Machine) -> None:
    suspended_on(machine, "r", "r:a")
    machine.ok("task.halt", {"id": "r"})
    machine.ok("promise.settle", {"id": "r:a", "state": "resolved"}, 20)
    assert machine.ok("task.get", {"id": "r"}, 20)["task"]["resumes"] == 1


def test_the_scrub_drops_a_settled_awaiters_registrations(machine: Machine) -> None:
    # r awaits r:a and r:b; r itself settles (its promise times out): its callbacks on
    # the still-pending r:a and r:b can never wake anything again.
    machine.create_task("r", timeout_at=1000)
    machine.create("r:a", timeout_at=50_000)
    machine.create("r:b", timeout_at=50_000)
    machine.ok("task.suspend", {"id": "r", "version": 1, "actions": awaits("r", "r:a", "r:b")})
    assert len(machine.snap()["callbacks"]) == 2
    machine.tick(1000)
    snap = machine.snap()
    assert snap["callbacks"] == []
    assert snap["tasks"][0]["state"] == "fulfilled"


def test_task_fulfill_runs_the_whole_chain(machine: Machine) -> None:
    machine.create_task("r")
    machine.create_task("r:child", pid="w2")
    machine.ok("task.suspend", {"id": "r", "version": 1, "actions": awaits("r", "r:child")}, 5)
    machine.ok("promise.register_listener", {"awaited": "r:child", "address": "poll://uni@g/x"})
    settled = machine.ok(
        "task.fulfill", {"id": "r:child", "version": 1, "action": settle_action("r:child")}, 9
    )["promise"]
    assert (settled["state"], settled["settledAt"]) == ("resolved", 9)
    snap = machine.snap()
    states = {t["id"]: t["state"] for t in snap["tasks"]}
    assert states == {"r": "pending", "r:child": "fulfilled"}
    kinds = sorted((m["address"], m["message"]["kind"]) for m in snap["messages"])
    assert kinds == [(TARGET, "execute"), ("poll://uni@g/x", "unblock")]


def test_a_promise_timeout_settles_with_its_deadline_and_resumes_with_now(
    machine: Machine,
) -> None:
    machine.create_task("r", ttl=10_000)
    machine.create("r:timer", timeout_at=300, tags={"resonate:timer": "true"})
    machine.ok("task.suspend", {"id": "r", "version": 1, "actions": awaits("r", "r:timer")}, 13)
    machine.tick(450)
    timer = machine.ok("promise.get", {"id": "r:timer"}, 450)["promise"]
    assert (timer["state"], timer["settledAt"]) == ("resolved", 300)
    snap = machine.snap()
    assert {"id": "r", "type": 0, "timeout": 450 + R} in snap["taskTimeouts"]
    assert snap["tasks"][0]["state"] == "pending"
