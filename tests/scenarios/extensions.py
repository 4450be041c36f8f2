"""Scenarios for the protocol extensions of docs/semantics.md: search and preload.

Lean answers searches with 501 (P-06, T-11, S-04) and leaves preload empty; troth defines
both. Search reads stored records (no projection), sorted by id, paged by a cursor that is
the last id served. Preload is the task branch's non-pending promises, sorted by id.
"""

from __future__ import annotations

from .build import (
    TARGETED,
    Machine,
    acquire,
    call,
    claim,
    create,
    fence,
    leased,
    ok,
    plain,
    promise,
    schedule,
    schedule_create,
    settle,
    spawn,
    suspend,
    task,
    task_create,
)

# -- search ---------------------------------------------------------------------------------


def scenario_promise_search_lists_stored_records_by_id(m: Machine) -> None:
    """promise.search: every promise, sorted by id, as stored (a dead one stays pending);
    no cursor when nothing more remains."""
    plain(m, "b", 1000, now=0)
    plain(m, "a", 100_000, now=0)
    plain(m, "c", 100_000, now=0)
    ok(m, "promise.settle", settle("c"), 1)
    body = ok(m, "promise.search", {}, 5000)
    assert body == {
        "promises": [
            promise("a", "pending", 100_000, 0),
            promise("b", "pending", 1000, 0),
            promise("c", "resolved", 100_000, 0, settled_at=1),
        ]
    }


def scenario_promise_search_filters_by_stored_state(m: Machine) -> None:
    """promise.search ``state``: exact stored state."""
    plain(m, "a", 1000, now=0)
    plain(m, "b", 100_000, now=0)
    ok(m, "promise.settle", settle("b", "rejected"), 1)
    body = ok(m, "promise.search", {"state": "pending"}, 5000)
    assert [p["id"] for p in body["promises"]] == ["a"]
    body = ok(m, "promise.search", {"state": "rejected"}, 5000)
    assert [p["id"] for p in body["promises"]] == ["b"]
    assert ok(m, "promise.search", {"state": "rejected_timedout"}, 5000) == {"promises": []}


def scenario_promise_search_filters_by_tag_containment(m: Machine) -> None:
    """promise.search ``tags``: every requested pair must be present with that value."""
    ok(m, "promise.create", create("x", 1000, {"app": "1", "env": "prod"}), 0)
    ok(m, "promise.create", create("y", 1000, {"app": "1"}), 0)
    ok(m, "promise.create", create("z", 1000, {"app": "2", "env": "prod"}), 0)
    body = ok(m, "promise.search", {"tags": {"app": "1"}}, 1)
    assert [p["id"] for p in body["promises"]] == ["x", "y"]
    body = ok(m, "promise.search", {"tags": {"app": "1", "env": "prod"}}, 1)
    assert [p["id"] for p in body["promises"]] == ["x"]


def scenario_promise_search_pages_with_a_cursor(m: Machine) -> None:
    """promise.search ``limit``/``cursor``: the cursor is the last id served; the last page
    has no cursor."""
    for id in "edcba":
        plain(m, id, 1000, now=0)
    first = ok(m, "promise.search", {"limit": 2}, 1)
    assert [p["id"] for p in first["promises"]] == ["a", "b"]
    assert first["cursor"] == "b"
    second = ok(m, "promise.search", {"limit": 2, "cursor": "b"}, 1)
    assert [p["id"] for p in second["promises"]] == ["c", "d"]
    assert second["cursor"] == "d"
    last = ok(m, "promise.search", {"limit": 2, "cursor": "d"}, 1)
    assert last == {"promises": [promise("e", "pending", 1000, 0)]}


def scenario_promise_search_omits_the_cursor_on_an_exactly_full_last_page(m: Machine) -> None:
    """promise.search: the cursor appears only when more rows exist beyond the page."""
    for id in "abcd":
        plain(m, id, 1000, now=0)
    body = ok(m, "promise.search", {"limit": 2, "cursor": "b"}, 1)
    assert [p["id"] for p in body["promises"]] == ["c", "d"]
    assert "cursor" not in body


def scenario_task_search_filters_by_stored_state(m: Machine) -> None:
    """task.search: stored task records by id, optionally of one state."""
    spawn(m, "a", 100_000, now=0)
    claim(m, "b", 100_000, now=0)
    spawn(m, "c", 100_000, now=0)
    ok(m, "promise.settle", settle("c"), 1)
    assert ok(m, "task.search", {"state": "acquired"}, 2) == {"tasks": [leased("b", 1)]}
    assert ok(m, "task.search", {}, 2) == {
        "tasks": [task("a", "pending", 0), leased("b", 1), task("c", "fulfilled", 0)]
    }


def scenario_schedule_search_filters_by_promise_tags(m: Machine) -> None:
    """schedule.search ``tags``: containment on ``promiseTags``."""
    one = {**TARGETED, "app": "1"}
    two = {**TARGETED, "app": "2"}
    ok(m, "schedule.create", schedule_create("s1", "* * * * *", "{{.id}}", 1000, one), 0)
    ok(m, "schedule.create", schedule_create("s2", "* * * * *", "{{.id}}", 1000, two), 0)
    body = ok(m, "schedule.search", {"tags": {"app": "1"}}, 1)
    assert body == {
        "schedules": [schedule("s1", "* * * * *", "{{.id}}", 1000, 0, 60_000, tags=one)]
    }
    assert [s["id"] for s in ok(m, "schedule.search", {}, 1)["schedules"]] == ["s1", "s2"]


# -- preload --------------------------------------------------------------------------------


def _branch(m: Machine) -> list[dict]:
    """Promises around the branch ``r``: the settled ones of branch ``r`` are r:1 and r:4."""
    plain(m, "r:1", 100_000, now=0, branch="r")
    ok(m, "promise.settle", settle("r:1", "resolved", {"data": "MQ=="}), 1)
    plain(m, "r:2", 100_000, now=0, branch="r")  # pending
    plain(m, "r:3", 100_000, now=0, branch="r:3")  # another branch
    ok(m, "promise.settle", settle("r:3"), 1)
    plain(m, "r:4", 1000, now=0, branch="r")
    ok(m, "promise.settle", settle("r:4", "rejected"), 2)
    plain(m, "r:5", 1000, now=0, branch="r")  # dead but stored pending
    tags = {"resonate:branch": "r"}
    return [
        promise("r:1", "resolved", 100_000, 0, tags=tags, settled_at=1, value={"data": "MQ=="}),
        promise("r:4", "rejected", 1000, 0, tags=tags, settled_at=2),
    ]


def scenario_preload_of_task_acquire_is_the_settled_branch(m: Machine) -> None:
    """task.acquire 200 preload: non-pending promises sharing the task's branch, by id."""
    expected = _branch(m)
    spawn(m, "r", 100_000, now=0, branch="r")
    body = ok(m, "task.acquire", acquire("r", 0), 5000)
    assert body["preload"] == expected


def scenario_preload_of_a_fresh_task_create_is_the_settled_branch(m: Machine) -> None:
    """task.create answering an acquired task: preload computed."""
    expected = _branch(m)
    tags = {**TARGETED, "resonate:branch": "r"}
    body = ok(m, "task.create", task_create("r", 100_000, tags), 5000)
    assert body["preload"] == expected


def scenario_preload_of_a_task_create_answering_a_fulfilled_task_is_empty(m: Machine) -> None:
    """task.create answering a fulfilled task: preload stays []."""
    _branch(m)
    spawn(m, "r", 100_000, now=0, branch="r")
    ok(m, "promise.settle", settle("r"), 3)
    tags = {**TARGETED, "resonate:branch": "r"}
    body = ok(m, "task.create", task_create("r", 100_000, tags), 5000)
    assert body["task"] == task("r", "fulfilled", 0)
    assert body["preload"] == []


def scenario_preload_of_task_fence_includes_what_the_fence_settled(m: Machine) -> None:
    """task.fence 200 preload: computed after the inner operation."""
    claim(m, "r", 100_000, now=0, branch="r")
    plain(m, "r:1", 100_000, now=0, branch="r")
    body = ok(m, "task.fence", fence("r", 1, "promise.settle", settle("r:1")), 10)
    tags = {"resonate:branch": "r"}
    assert body["preload"] == [promise("r:1", "resolved", 100_000, 0, tags=tags, settled_at=10)]


def scenario_preload_of_a_300_suspend_is_the_settled_branch(m: Machine) -> None:
    """task.suspend 300 preload."""
    expected = _branch(m)
    claim(m, "r", 100_000, now=0, branch="r")
    assert call(m, "task.suspend", suspend("r", 1, "r:2", "r:1"), 10) == (
        300,
        {"preload": expected},
    )


def scenario_preload_is_empty_without_a_branch_tag(m: Machine) -> None:
    """Preload: a task promise with no ``resonate:branch`` gets []."""
    plain(m, "r:1", 100_000, now=0, branch="r")
    ok(m, "promise.settle", settle("r:1"), 1)
    spawn(m, "r", 100_000, now=0)
    assert ok(m, "task.acquire", acquire("r", 0), 5)["preload"] == []
