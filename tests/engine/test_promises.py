"""promise.get/create/settle/register_callback/register_listener through the SQLite backend."""

from __future__ import annotations

from tests.engine.machine import TARGET, Machine, R


def test_get_of_an_unknown_promise_is_404(machine: Machine) -> None:
    assert machine.call("promise.get", {"id": "nope"})[0] == 404


def test_a_promise_without_target_or_timer_gets_no_timeout_and_no_task(machine: Machine) -> None:
    p = machine.create("p", timeout_at=500, now=10)
    assert (p["state"], p["createdAt"], p.get("settledAt")) == ("pending", 10, None)
    snap = machine.snap()
    assert snap["promiseTimeouts"] == [] and snap["tasks"] == [] and snap["messages"] == []


def test_a_targeted_promise_gets_a_task_a_retry_and_an_execute(machine: Machine) -> None:
    machine.create("p", timeout_at=50_000, now=7, tags={"resonate:target": TARGET})
    snap = machine.snap()
    assert snap["promiseTimeouts"] == [{"id": "p", "timeout": 50_000}]
    assert snap["tasks"] == [{"id": "p", "state": "pending", "version": 0, "resumes": 0}]
    assert snap["taskTimeouts"] == [{"id": "p", "type": 0, "timeout": 7 + R}]
    assert snap["messages"] == [
        {
            "address": TARGET,
            "message": {"kind": "execute", "head": {}, "data": {"task": {"id": "p", "version": 0}}},
        }
    ]


def test_a_timer_promise_is_swept_though_untargeted(machine: Machine) -> None:
    machine.create("t", timeout_at=300, tags={"resonate:timer": "true"})
    assert machine.snap()["promiseTimeouts"] == [{"id": "t", "timeout": 300}]
    assert machine.tick(300) == 1
    assert machine.ok("promise.get", {"id": "t"}, 300)["promise"]["state"] == "resolved"


def test_a_delay_defers_the_first_execute_to_the_delay(machine: Machine) -> None:
    tags = {"resonate:target": TARGET, "resonate:delay": "2000"}
    machine.create("p", timeout_at=50_000, now=100, tags=tags)
    snap = machine.snap()
    assert snap["taskTimeouts"] == [{"id": "p", "type": 0, "timeout": 2000}]
    assert snap["messages"] == []
    machine.tick(2000)
    assert [m["message"]["kind"] for m in machine.snap()["messages"]] == ["execute"]


def test_a_delay_already_past_dispatches_at_once(machine: Machine) -> None:
    tags = {"resonate:target": TARGET, "resonate:delay": "50"}
    machine.create("p", timeout_at=50_000, now=100, tags=tags)
    snap = machine.snap()
    assert snap["taskTimeouts"] == [{"id": "p", "type": 0, "timeout": 100 + R}]
    assert len(snap["messages"]) == 1


def test_a_promise_born_dead_is_settled_by_its_deadline(machine: Machine) -> None:
    p = machine.create("p", timeout_at=40, now=100, tags={"resonate:target": TARGET})
    assert (p["state"], p["createdAt"], p["settledAt"]) == ("rejected_timedout", 40, 40)
    snap = machine.snap()
    assert snap["tasks"] == [{"id": "p", "state": "fulfilled", "version": 0, "resumes": 0}]
    assert snap["promiseTimeouts"] == snap["taskTimeouts"] == snap["messages"] == []


def test_a_timer_born_dead_is_resolved(machine: Machine) -> None:
    p = machine.create("t", timeout_at=40, now=100, tags={"resonate:timer": "true"})
    assert p["state"] == "resolved"


def test_create_is_idempotent_and_compares_nothing(machine: Machine) -> None:
    first = machine.create("p", timeout_at=500)
    again = machine.create("p", timeout_at=9, now=1, tags={"resonate:target": TARGET})
    assert again == first
    assert machine.snap()["tasks"] == []


def test_a_dead_promise_is_projected_on_read_without_a_write(machine: Machine) -> None:
    machine.create("p", timeout_at=500, tags={"resonate:target": TARGET})
    before = machine.snap()
    got = machine.ok("promise.get", {"id": "p"}, 500)["promise"]
    assert (got["state"], got["settledAt"]) == ("rejected_timedout", 500)
    assert machine.ok("promise.get", {"id": "p"}, 499)["promise"]["state"] == "pending"
    assert machine.snap() == before


def test_create_of_an_existing_dead_promise_answers_the_projection(machine: Machine) -> None:
    machine.create("t", timeout_at=500, tags={"resonate:timer": "true"})
    assert machine.create("t", now=600)["state"] == "resolved"


def test_settle_of_an_unknown_promise_is_404(machine: Machine) -> None:
    status, _ = machine.call("promise.settle", {"id": "x", "state": "resolved"})
    assert status == 404


def test_settle_decides_the_promise_and_fulfils_its_task(machine: Machine) -> None:
    machine.create("p", timeout_at=500, tags={"resonate:target": TARGET})
    settled = machine.ok(
        "promise.settle", {"id": "p", "state": "rejected", "value": {"data": "boom"}}, 20
    )["promise"]
    assert (settled["state"], settled["settledAt"], settled["value"]) == (
        "rejected",
        20,
        {"data": "boom"},
    )
    snap = machine.snap()
    assert snap["tasks"] == [{"id": "p", "state": "fulfilled", "version": 0, "resumes": 0}]
    assert snap["promiseTimeouts"] == snap["taskTimeouts"] == []


def test_settle_of_a_settled_promise_changes_nothing(machine: Machine) -> None:
    machine.create("p")
    machine.ok("promise.settle", {"id": "p", "state": "resolved", "value": {"data": "1"}}, 5)
    again = machine.ok("promise.settle", {"id": "p", "state": "rejected"}, 6)["promise"]
    assert (again["state"], again["value"], again["settledAt"]) == ("resolved", {"data": "1"}, 5)


def test_a_late_settle_answers_the_timeout_and_writes_nothing(machine: Machine) -> None:
    machine.create("p", timeout_at=500, tags={"resonate:target": TARGET})
    before = machine.snap()
    late = machine.ok("promise.settle", {"id": "p", "state": "resolved"}, 501)["promise"]
    assert (late["state"], late["settledAt"]) == ("rejected_timedout", 500)
    assert machine.snap() == before


def test_register_callback_checks_awaited_then_awaiter(machine: Machine) -> None:
    machine.create("r:a")
    machine.create("r:untargeted")
    cb = "promise.register_callback"
    assert machine.call(cb, {"awaited": "r:none", "awaiter": "r:none2"})[0] == 404
    assert machine.call(cb, {"awaited": "r:a", "awaiter": "r:none"})[0] == 422
    assert machine.call(cb, {"awaited": "r:a", "awaiter": "r:untargeted"})[0] == 422


def test_register_callback_records_the_awaiter_once(machine: Machine) -> None:
    machine.create("r:a")
    machine.create("r", tags={"resonate:target": TARGET})
    for _ in range(2):
        answer = machine.ok("promise.register_callback", {"awaited": "r:a", "awaiter": "r"})
        assert answer["promise"]["id"] == "r:a"
    assert machine.snap()["callbacks"] == [{"awaiter": "r", "awaited": "r:a"}]


def test_register_callback_on_a_settled_promise_writes_nothing(machine: Machine) -> None:
    machine.create("r:a")
    machine.create("r", tags={"resonate:target": TARGET})
    machine.ok("promise.settle", {"id": "r:a", "state": "resolved"})
    before = machine.snap()
    answer = machine.ok("promise.register_callback", {"awaited": "r:a", "awaiter": "r"}, 1)
    assert answer["promise"]["state"] == "resolved"
    assert machine.snap() == before


def test_register_callback_of_a_dead_awaiter_is_not_recorded(machine: Machine) -> None:
    machine.create("r:a", timeout_at=10_000)
    machine.create("r", timeout_at=100, tags={"resonate:target": TARGET})
    machine.ok("promise.register_callback", {"awaited": "r:a", "awaiter": "r"}, 100)
    assert machine.snap()["callbacks"] == []


def test_register_callback_on_a_dead_promise_answers_the_projection(machine: Machine) -> None:
    machine.create("r:a", timeout_at=100)
    machine.create("r", timeout_at=10_000, tags={"resonate:target": TARGET})
    got = machine.ok("promise.register_callback", {"awaited": "r:a", "awaiter": "r"}, 100)
    assert got["promise"]["state"] == "rejected_timedout"
    assert machine.snap()["callbacks"] == []


def test_listeners_are_recorded_once_and_unblocked_with_the_settled_record(
    machine: Machine,
) -> None:
    machine.create("p")
    for address in ("poll://uni@g/1", "poll://uni@g/2", "poll://uni@g/1"):
        machine.ok("promise.register_listener", {"awaited": "p", "address": address})
    assert [entry["address"] for entry in machine.snap()["listeners"]] == [
        "poll://uni@g/1",
        "poll://uni@g/2",
    ]
    settled = machine.ok("promise.settle", {"id": "p", "state": "resolved"}, 3)["promise"]
    snap = machine.snap()
    assert snap["listeners"] == []
    assert sorted((m["address"], m["message"]["kind"]) for m in snap["messages"]) == [
        ("poll://uni@g/1", "unblock"),
        ("poll://uni@g/2", "unblock"),
    ]
    assert all(m["message"]["data"]["promise"] == settled for m in snap["messages"])


def test_register_listener_on_a_settled_promise_writes_nothing(machine: Machine) -> None:
    machine.create("p")
    machine.ok("promise.settle", {"id": "p", "state": "resolved"})
    assert (
        machine.call("promise.register_listener", {"awaited": "x", "address": "poll://uni@g/1"})[0]
        == 404
    )
    machine.ok("promise.register_listener", {"awaited": "p", "address": "poll://uni@g/1"})
    assert machine.snap()["listeners"] == []
