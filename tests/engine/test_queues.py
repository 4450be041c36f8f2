"""Queues in the engine (``troth.engine.queues``, docs/queues.md), over a real SQLite file:
which tasks are offered when, what frees a slot, the order of the line, and the refusals.

A task is *offered* when its execute is in the outbox; the tests read the outbox from the
snapshot, take each offered task as a worker would (``task.acquire``), and finish it
(``task.fulfill``), so every count below is of what a worker could actually run.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.engine.machine import TARGET, Machine, awaits, settle_action
from troth.protocol.envelope import BadRequest

TTL = 1000


def declare(machine: Machine, name: str = "q", now: int = 0, **spec: Any) -> Any:
    return machine.ok("queue.set", {"queue": {"name": name, **spec}}, now)["queue"]


def start(
    machine: Machine,
    id: str,
    key: str | None = None,
    priority: int | None = None,
    now: int = 0,
    queue: str = "q",
) -> None:
    tags = {"resonate:target": TARGET, "troth:queue": queue}
    if key is not None:
        tags["troth:queue-key"] = key
    if priority is not None:
        tags["troth:priority"] = str(priority)
    machine.create(id, now=now, tags=tags)


def offered(machine: Machine) -> list[str]:
    """The pending tasks whose execute is in the outbox (in the order it was enqueued): what
    a worker is offered. An execute stays in the outbox until delivered (none is, here), so
    one for a task since taken is not an offer."""
    snap = machine.snap()
    pending = {(t["id"], t["version"]) for t in snap["tasks"] if t["state"] == "pending"}
    tasks = [m["message"]["data"]["task"] for m in snap["messages"]]
    return [t["id"] for t in tasks if (t["id"], t["version"]) in pending]


def take(machine: Machine, id: str, now: int = 0) -> int:
    """Acquire ``id`` as a worker would on its execute; the version it holds."""
    [task] = [t for t in machine.snap()["tasks"] if t["id"] == id]
    claim = machine.ok(
        "task.acquire", {"id": id, "version": task["version"], "pid": "w", "ttl": TTL}, now
    )
    version: int = claim["task"]["version"]
    return version


def finish(machine: Machine, id: str, version: int, now: int = 0) -> None:
    machine.ok("task.fulfill", {"id": id, "version": version, "action": settle_action(id)}, now)


def run_all(machine: Machine, now: int = 0) -> list[str]:
    """Take and finish every offered task, one at a time, until none is offered; the order."""
    order = []
    while ids := offered(machine):
        id = ids[0]
        finish(machine, id, take(machine, id, now), now)
        order.append(id)
    return order


def refused(machine: Machine, kind: str, data: dict[str, Any]) -> str:
    """The message of a 400, whether the doors (validation) or the engine gave it."""
    try:
        status, body = machine.call(kind, data)
    except BadRequest as e:
        return e.message
    assert status == 400, body
    return str(body)


@pytest.fixture
def m(machine: Machine) -> Machine:
    return machine


# -- declaring and refusing ---------------------------------------------------------------------


def test_a_declared_queue_reads_back_with_its_counts(m: Machine) -> None:
    declared = declare(m, concurrency=2, keyConcurrency=1, rate={"limit": 5, "period": 1000})
    assert declared["spec"] == {
        "name": "q",
        "concurrency": 2,
        "keyConcurrency": 1,
        "rate": {"limit": 5, "period": 1000},
    }
    for i in range(3):
        start(m, f"e{i}", key=f"k{i}")
    got = m.ok("queue.get", {"name": "q"})["queue"]
    assert (got["running"], got["waiting"]) == (2, 1)
    assert {k["key"]: (k["running"], k["waiting"]) for k in got["keys"]} == {
        "k0": (1, 0),
        "k1": (1, 0),
        "k2": (0, 1),
    }
    assert m.call("queue.get", {"name": "nope"})[0] == 404
    listed = m.ok("queue.search", {})["queues"]
    assert [q["spec"]["name"] for q in listed] == ["q"]


def test_a_promise_in_an_undeclared_queue_is_refused_and_nothing_is_written(m: Machine) -> None:
    tags = {"resonate:target": TARGET, "troth:queue": "ghost"}
    message = refused(m, "promise.create", {"id": "e", "timeoutAt": 100_000, "tags": tags})
    assert "troth:queue" in message and "ghost" in message
    assert m.call("promise.get", {"id": "e"})[0] == 404


@pytest.mark.parametrize(
    ("tags", "named"),
    [
        ({"troth:queue": "q"}, "resonate:target"),
        ({"resonate:target": TARGET, "troth:queue": "q", "troth:queue-key": "k" * 513}, "513"),
        ({"resonate:target": TARGET, "troth:queue": "q", "troth:priority": "high"}, "priority"),
        ({"resonate:target": TARGET, "troth:queue": "q", "troth:priority": "-1"}, "priority"),
        ({"resonate:target": TARGET, "troth:queue-key": "k"}, "troth:queue"),
    ],
)
def test_bad_queue_tags_are_a_400_naming_the_tag(
    m: Machine, tags: dict[str, str], named: str
) -> None:
    declare(m, concurrency=1)
    message = refused(m, "promise.create", {"id": "e", "timeoutAt": 100_000, "tags": tags})
    assert named.replace("513", "512") in message


@pytest.mark.parametrize(
    "spec",
    [
        {"name": "q", "concurrency": 0},
        {"name": "q", "keyConcurrency": -1},
        {"name": "q", "rate": {"limit": 0, "period": 1000}},
        {"name": "q", "rate": {"limit": 1, "period": 0}},
        {"name": ""},
        {"name": "n" * 513},
    ],
)
def test_bad_limits_are_a_400_and_declare_nothing(m: Machine, spec: dict[str, Any]) -> None:
    assert refused(m, "queue.set", {"queue": spec})
    assert m.ok("queue.search", {})["queues"] == []


def test_task_create_cannot_start_a_queued_execution_already_held(m: Machine) -> None:
    declare(m, concurrency=1)
    action = {
        "kind": "promise.create",
        "head": {},
        "data": {
            "id": "e",
            "timeoutAt": 100_000,
            "tags": {"resonate:target": TARGET, "troth:queue": "q"},
        },
    }
    assert "promise.create" in refused(m, "task.create", {"pid": "w", "ttl": TTL, "action": action})
    assert m.call("promise.get", {"id": "e"})[0] == 404


# -- limits -------------------------------------------------------------------------------------


def test_concurrency_offers_only_as_many_as_there_are_slots(m: Machine) -> None:
    declare(m, concurrency=2)
    for i in range(5):
        start(m, f"e{i}")
    assert offered(m) == ["e0", "e1"]
    # A waiting task is not offered to anyone: acquiring it is refused.
    status, _ = m.call("task.acquire", {"id": "e3", "version": 0, "pid": "w", "ttl": TTL})
    assert status == 409
    v0 = take(m, "e0")
    assert offered(m) == ["e1"]  # still two slots held: e0 running, e1 offered
    finish(m, "e0", v0)
    assert offered(m) == ["e1", "e2"]
    assert run_all(m) == ["e1", "e2", "e3", "e4"]


def test_keys_are_limited_apart_and_one_keys_line_never_blocks_another(m: Machine) -> None:
    declare(m, keyConcurrency=1)
    for i in range(3):
        start(m, f"a{i}", key="a")
    start(m, "b0", key="b")
    assert sorted(offered(m)) == ["a0", "b0"]
    finish(m, "b0", take(m, "b0"))
    start(m, "b1", key="b")
    assert sorted(offered(m)) == ["a0", "b1"]  # a's line waits for a0 alone


def test_the_line_is_round_robin_across_keys(m: Machine) -> None:
    declare(m, concurrency=1)
    for i in range(4):
        start(m, f"a{i}", key="a")
    for i in range(2):
        start(m, f"b{i}", key="b")
    start(m, "c0", key="c")
    assert run_all(m) == ["a0", "b0", "c0", "a1", "b1", "a2", "a3"]


def test_a_key_that_arrives_late_is_served_before_a_key_already_served(m: Machine) -> None:
    declare(m, concurrency=1)
    for i in range(100):
        start(m, f"big{i:03}", key="big")
    order = [run_all_once(m) for _ in range(3)]
    start(m, "small", key="small")  # big003 holds the one slot meanwhile
    order += [run_all_once(m) for _ in range(3)]
    assert order == ["big000", "big001", "big002", "big003", "small", "big004"]


def run_all_once(m: Machine) -> str:
    id = offered(m)[0]
    finish(m, id, take(m, id))
    return id


def test_priority_lower_first_then_first_come_first_served(m: Machine) -> None:
    declare(m, concurrency=1, priority=True)
    start(m, "first", priority=9)  # takes the free slot at once
    start(m, "p5", priority=5)
    start(m, "p1", priority=1)
    start(m, "p5-later", priority=5)
    start(m, "p3", priority=3, key="other")
    assert run_all(m) == ["first", "p1", "p3", "p5", "p5-later"]


def test_without_priority_a_priority_tag_changes_nothing(m: Machine) -> None:
    declare(m, concurrency=1)
    for id, priority in [("x", 9), ("y", 5), ("z", 1)]:
        start(m, id, priority=priority)
    assert run_all(m) == ["x", "y", "z"]


def test_a_rate_admits_at_most_its_limit_in_any_window(m: Machine) -> None:
    declare(m, rate={"limit": 2, "period": 1000})
    for i in range(5):
        start(m, f"e{i}")
    assert run_all(m) == ["e0", "e1"]
    m.tick(999)
    assert offered(m) == []
    m.tick(1000)  # the window has moved past the first two starts
    assert run_all(m, now=1000) == ["e2", "e3"]
    m.tick(1500)
    assert offered(m) == []
    m.tick(2000)
    assert run_all(m, now=2000) == ["e4"]


def test_a_key_rate_holds_back_its_key_only(m: Machine) -> None:
    declare(m, keyRate={"limit": 1, "period": 1000})
    start(m, "a0", key="a")
    start(m, "a1", key="a")
    start(m, "b0", key="b")
    assert run_all(m) == ["a0", "b0"]
    m.tick(1000)
    assert run_all(m, now=1000) == ["a1"]


# -- what holds a slot, and what gives it back ----------------------------------------------


def test_a_suspended_execution_gives_its_slot_back_and_queues_again_when_resumed(
    m: Machine,
) -> None:
    declare(m, concurrency=1)
    start(m, "parent")
    start(m, "other")
    version = take(m, "parent")
    m.create("parent:child", tags={"resonate:origin": "parent"})
    status, _ = m.call(
        "task.suspend",
        {"id": "parent", "version": version, "actions": awaits("parent", "parent:child")},
    )
    assert status == 200
    assert offered(m) == ["other"]  # the slot the parent gave back
    m.ok("promise.settle", {"id": "parent:child", "state": "resolved"})
    assert offered(m) == ["other"]  # resumed, the parent waits for a slot again
    assert run_all(m) == ["other", "parent"]


def test_a_lapsed_lease_keeps_the_slot_and_the_task_is_offered_again_at_once(m: Machine) -> None:
    declare(m, concurrency=1)
    start(m, "e0")
    start(m, "e1")
    take(m, "e0")  # the worker dies holding it
    m.tick(TTL)
    assert offered(m) == ["e0"]  # offered again, ahead of the line
    assert run_all(m, now=TTL) == ["e0", "e1"]


def test_halt_gives_the_slot_back_and_continue_queues_again(m: Machine) -> None:
    declare(m, concurrency=1)
    start(m, "e0")
    start(m, "e1")
    take(m, "e0")
    m.ok("task.halt", {"id": "e0"})
    assert offered(m) == ["e1"]
    m.ok("task.continue", {"id": "e0"})
    assert offered(m) == ["e1"]
    assert run_all(m) == ["e1", "e0"]


def test_a_waiting_execution_that_times_out_leaves_the_line(m: Machine) -> None:
    declare(m, concurrency=1)
    start(m, "e0")
    m.create("late", timeout_at=500, tags={"resonate:target": TARGET, "troth:queue": "q"})
    start(m, "e1")
    m.tick(500)
    assert m.ok("queue.get", {"name": "q"})["queue"]["waiting"] == 1
    assert run_all(m, now=500) == ["e0", "e1"]
    counts = m.ok("queue.get", {"name": "q"}, 500)["queue"]
    assert (counts["running"], counts["waiting"], counts["keys"]) == (0, 0, [])


def test_raising_a_limit_admits_at_once(m: Machine) -> None:
    declare(m, concurrency=1)
    for i in range(3):
        start(m, f"e{i}")
    assert offered(m) == ["e0"]
    declare(m, concurrency=3)
    assert offered(m) == ["e0", "e1", "e2"]


def test_a_delayed_queued_execution_joins_the_line_when_its_delay_is_over(m: Machine) -> None:
    declare(m, concurrency=1)
    tags = {"resonate:target": TARGET, "troth:queue": "q", "resonate:delay": "300"}
    m.create("later", tags=tags)
    start(m, "now")
    assert offered(m) == ["now"]
    m.tick(300)
    assert m.ok("queue.get", {"name": "q"}, 300)["queue"]["waiting"] == 1
    assert run_all(m, now=300) == ["now", "later"]


def test_the_servers_idle_deferral_never_holds_back_a_queue(machine: Machine) -> None:
    """The timeouts loop defers a retry whose execute waits undelivered (docs/semantics.md,
    "Idle retries"); a task waiting in its queue may have such an execute left from before
    it queued again, and its retry is the rate's wake-up: it must fire."""
    m = machine
    declare(m, rate={"limit": 1, "period": 1000})
    start(m, "e1")  # offered (its execute stays in the outbox, never delivered here)
    m.ok("task.halt", {"id": "e1"})
    m.ok("task.continue", {"id": "e1"}, 10)  # queues again: the rate holds it until 1000
    assert m.ok("queue.get", {"name": "q"}, 10)["queue"]["waiting"] == 1
    m.run(m.service.fire_due(1000, defer_idle=True))
    counts = m.ok("queue.get", {"name": "q"}, 1000)["queue"]
    assert (counts["running"], counts["waiting"]) == (1, 0)


# -- admitted on arrival: nobody waits and a slot is free -------------------------------------


def counts(m: Machine, now: int = 0) -> tuple[int, int, dict[str, tuple[int, int]]]:
    got = m.ok("queue.get", {"name": "q"}, now)["queue"]
    keys = {k["key"]: (k["running"], k["waiting"]) for k in got["keys"]}
    return got["running"], got["waiting"], keys


def test_an_execution_admitted_on_arrival_is_counted_as_one_granted_from_the_line(
    m: Machine,
) -> None:
    declare(m, concurrency=2, keyConcurrency=1)
    start(m, "a0", key="a")
    start(m, "b0", key="b")  # both admitted as they arrive
    start(m, "a1", key="a")  # its key is full
    start(m, "c0", key="c")  # the queue is full
    assert offered(m) == ["a0", "b0"]
    assert counts(m) == (2, 2, {"a": (1, 1), "b": (1, 0), "c": (0, 1)})
    finish(m, "a0", take(m, "a0"))
    assert set(offered(m)) == {"b0", "c0"}  # c was never served: it goes before a
    assert counts(m) == (2, 1, {"a": (0, 1), "b": (1, 0), "c": (1, 0)})
    finish(m, "b0", take(m, "b0"))
    assert set(offered(m)) == {"a1", "c0"}
    assert sorted(run_all(m)) == ["a1", "c0"]
    assert counts(m) == (0, 0, {})


def test_a_delayed_execution_with_room_when_its_delay_is_over_is_offered_then(m: Machine) -> None:
    """Its retry admits it on arrival, and offers it as every retry does: it never holds a
    slot with no execute sent (the retry offers it then, not the queue)."""
    declare(m, concurrency=1)
    tags = {"resonate:target": TARGET, "troth:queue": "q", "resonate:delay": "300"}
    m.create("later", tags=tags)
    assert offered(m) == []
    m.tick(300)
    assert offered(m) == ["later"]
    assert counts(m, 300) == (1, 0, {"": (1, 0)})
    assert run_all(m, now=300) == ["later"]
    assert counts(m, 300) == (0, 0, {})
