"""Where a task stands in its queue (``queue.get`` with ``task``, docs/queues.md "Seeing
queues"): its key, priority, whether it holds a slot, and its place in its key's line."""

from __future__ import annotations

from typing import Any

from tests.engine.machine import Machine
from tests.engine.test_queues import declare, finish, refused, start, take


def entry(machine: Machine, task: str, name: str = "q") -> Any:
    return machine.ok("queue.get", {"name": name, "task": task}).get("entry")


def test_a_waiting_task_has_its_place_in_its_keys_line(machine: Machine) -> None:
    declare(machine, concurrency=1)
    for id, key in (("a1", "a"), ("a2", "a"), ("b1", "b"), ("a3", "a")):
        start(machine, id, key=key)
    assert entry(machine, "a1") == {"key": "a", "priority": 0, "admitted": True}
    assert entry(machine, "a2") == {"key": "a", "priority": 0, "admitted": False, "position": 1}
    assert entry(machine, "a3")["position"] == 2
    assert entry(machine, "b1")["position"] == 1
    finish(machine, "a1", take(machine, "a1"))  # b is served next (round robin); a's line moves
    assert entry(machine, "b1") == {"key": "b", "priority": 0, "admitted": True}
    assert entry(machine, "a2")["position"] == 1
    assert entry(machine, "a3")["position"] == 2


def test_a_lower_priority_goes_before_those_that_came_first(machine: Machine) -> None:
    declare(machine, concurrency=1, priority=True)
    start(machine, "run", priority=0)
    start(machine, "late", priority=5)
    start(machine, "later", priority=5)
    start(machine, "urgent", priority=1)
    positions = {id: entry(machine, id)["position"] for id in ("urgent", "late", "later")}
    assert positions == {"urgent": 1, "late": 2, "later": 3}


def test_without_task_the_answer_is_unchanged_and_a_task_elsewhere_has_no_entry(
    machine: Machine,
) -> None:
    declare(machine, concurrency=1)
    declare(machine, "other")
    start(machine, "x")
    plain = machine.ok("queue.get", {"name": "q"})
    assert set(plain) == {"queue"}
    assert entry(machine, "x", "other") is None
    assert entry(machine, "no-such-task") is None


def test_a_bad_task_is_a_400_naming_it(machine: Machine) -> None:
    declare(machine)
    assert "task" in refused(machine, "queue.get", {"name": "q", "task": ""})
    assert "task" in refused(machine, "queue.get", {"name": "q", "task": "x" * 600})
