"""The search extension: stored records, exact stored state, tags containment, cursors."""

from __future__ import annotations

import json

from tests.engine.machine import TARGET, Machine
from troth.protocol.limits import MAX_PAGE_BYTES


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


def _large(machine: Machine, id: str, size: int) -> None:
    param = {"data": "x" * size}
    machine.ok("promise.create", {"id": id, "timeoutAt": 100_000, "param": param})


def test_a_page_ends_where_its_bytes_pass_the_bound_and_the_cursor_goes_on(
    machine: Machine,
) -> None:
    # 400 KB each: two fit in a page's MAX_PAGE_BYTES (1 MiB), a third does not.
    for id in ("p1", "p2", "p3", "p4", "p5"):
        _large(machine, id, 400_000)
    seen: list[str] = []
    cursor = None
    while True:
        page = machine.ok(
            "promise.search", {"limit": 1000, **({"cursor": cursor} if cursor else {})}
        )
        ids = [p["id"] for p in page["promises"]]
        size = sum(len(json.dumps(p)) for p in page["promises"])
        assert (0 < size <= MAX_PAGE_BYTES and len(ids) == 2) or ids == ["p5"], (ids, size)
        seen += ids
        cursor = page.get("cursor")
        if cursor is None:
            break
        assert cursor == ids[-1]
    assert seen == ["p1", "p2", "p3", "p4", "p5"]


def test_a_record_larger_than_the_page_bound_is_a_page_of_its_own(machine: Machine) -> None:
    _large(machine, "a", MAX_PAGE_BYTES + 10)
    machine.create("b")
    page = machine.ok("promise.search", {})
    assert [p["id"] for p in page["promises"]] == ["a"] and page["cursor"] == "a"
    page = machine.ok("promise.search", {"cursor": "a"})
    assert [p["id"] for p in page["promises"]] == ["b"] and "cursor" not in page


def test_schedule_search_pages_are_bounded_in_bytes_too(machine: Machine) -> None:
    for id in ("s1", "s2", "s3"):
        data = {
            "id": id,
            "cron": "@hourly",
            "promiseId": "{{.id}}.{{.timestamp}}",
            "promiseTimeout": 1000,
            "promiseParam": {"data": "y" * 600_000},
            "promiseTags": {"resonate:target": TARGET},
        }
        machine.ok("schedule.create", data)
    page = machine.ok("schedule.search", {"limit": 3})
    assert [s["id"] for s in page["schedules"]] == ["s1"] and page["cursor"] == "s1"
