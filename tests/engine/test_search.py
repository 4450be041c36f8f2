"""The search extension: stored records, exact stored state, tags containment, cursors."""

from __future__ import annotations

from engine.machine import TARGET, Machine


def test_promise_search_filters_by_stored_state_and_tags(machine: Machine) -> None:
    machine.create("a", timeout_at=100, tags={"resonate:origin": "a", "k": "1"})
    machine.create("b", tags={"k": "1"})
    machine.create("c", tags={"k": "2"})
    machine.ok("promise.settle", {"id": "b", "state": "resolved"})
    # "a" is dead at 200 but search lists storage: it is still pending there.
    found = machine.ok("promise.search", {"state": "pending"}, 200)["promises"]
    assert [(p["id"], p["state"]) for p in found] == [("a", "pending"), ("c", "pending")]
    found = machine.ok("promise.search", {"tags": {"k": "1"}})["promises"]
    assert [p["id"] for p in found] == ["a", "b"]
    found = machine.ok("promise.search", {"tags": {"resonate:origin": "a", "k": "1"}})
    assert [p["id"] for p in found["promises"]] == ["a"]


def test_promise_search_pages_with_the_last_id_as_cursor(machine: Machine) -> None:
    for id in ("p1", "p2", "p3", "p4", "p5"):
        machine.create(id)
    page = machine.ok("promise.search", {"limit": 2})
    assert ([p["id"] for p in page["promises"]], page["cursor"]) == (["p1", "p2"], "p2")
    page = machine.ok("promise.search", {"limit": 2, "cursor": "p4"})
    assert [p["id"] for p in page["promises"]] == ["p5"] and "cursor" not in page
    page = machine.ok("promise.search", {"limit": 3, "cursor": "p2"})
    assert [p["id"] for p in page["promises"]] == ["p3", "p4", "p5"] and "cursor" not in page


def test_task_search_filters_by_state(machine: Machine) -> None:
    machine.create("a", tags={"resonate:target": TARGET})
    machine.create_task("b")
    found = machine.ok("task.search", {"state": "acquired"})["tasks"]
    assert [t["id"] for t in found] == ["b"]
    assert [t["id"] for t in machine.ok("task.search", {})["tasks"]] == ["a", "b"]


def test_schedule_search_matches_promise_tags(machine: Machine) -> None:
    for id, team in (("s1", "x"), ("s2", "y")):
        data = {
            "id": id,
            "cron": "@hourly",
            "promiseId": "{{.id}}.{{.timestamp}}",
            "promiseTimeout": 1000,
            "promiseTags": {"resonate:target": TARGET, "team": team},
        }
        machine.ok("schedule.create", data)
    found = machine.ok("schedule.search", {"tags": {"team": "y"}})["schedules"]
    assert [s["id"] for s in found] == ["s2"]
