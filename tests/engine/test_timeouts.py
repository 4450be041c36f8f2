"""The task retry and lease transitions as the sweep fires them."""

from __future__ import annotations

from tests.engine.machine import TARGET, Machine, R


def test_an_expired_lease_returns_the_task_to_pending_and_offers_it(machine: Machine) -> None:
    machine.create_task("t", ttl=100)
    assert machine.tick(99) == 0
    assert machine.tick(100) == 1
    snap = machine.snap()
    assert snap["tasks"] == [{"id": "t", "state": "pending", "version": 1, "resumes": 0}]
    assert snap["taskTimeouts"] == [{"id": "t", "type": 0, "timeout": 100 + R}]
    assert [m["message"]["data"]["task"] for m in snap["messages"]] == [{"id": "t", "version": 1}]


def test_an_unclaimed_task_is_offered_again_every_retry_timeout(machine: Machine) -> None:
    machine.create("t", timeout_at=10 * R, tags={"resonate:target": TARGET})
    first = machine.run(machine.service.undelivered(10))
    assert machine.tick(R) == 1
    again = machine.run(machine.service.undelivered(10))
    assert len(again) == 1 and again[0].seq > first[0].seq
    assert machine.snap()["taskTimeouts"] == [{"id": "t", "type": 0, "timeout": 2 * R}]


def test_a_late_sweep_fires_everything_due_in_one_call(machine: Machine) -> None:
    machine.create("t", timeout_at=3 * R + 1, tags={"resonate:target": TARGET})
    # The retry due at R fires first (re-arming at now + R, not yet due), then the promise
    # timeout, which takes the task's timeouts with it.
    assert machine.tick(3 * R + 1) == 2
    snap = machine.snap()
    assert snap["tasks"][0]["state"] == "fulfilled"
    assert snap["taskTimeouts"] == snap["promiseTimeouts"] == []
