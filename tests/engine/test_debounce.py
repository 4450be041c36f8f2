"""Debounce (``troth.engine.debounce``, docs/queues.md): starts of one queue key within the
window collapse into the last one, which runs once the window has passed with no newer
start; every superseded start is resolved pointing at the one that superseded it."""

from __future__ import annotations

from typing import Any

from tests.engine.machine import TARGET, Machine
from tests.engine.test_queues import declare, offered, refused, run_all

POINTER = "troth:debounced-into"


def debounced(m: Machine, id: str, key: str, now: int, window: int = 1000) -> None:
    tags = {
        "resonate:target": TARGET,
        "troth:queue": "q",
        "troth:queue-key": key,
        "troth:debounce": str(window),
    }
    m.create(id, now=now, tags=tags)


def promise(m: Machine, id: str, now: int = 0) -> Any:
    return m.ok("promise.get", {"id": id}, now)["promise"]


def test_a_burst_runs_once_with_the_last_start_a_window_after_it_ends(machine: Machine) -> None:
    m = machine
    declare(m, concurrency=5)
    debounced(m, "s1", "k", now=0)
    debounced(m, "s2", "k", now=400)
    debounced(m, "s3", "k", now=900)
    assert offered(m) == []  # nothing runs while starts keep coming
    first, second = promise(m, "s1", 900), promise(m, "s2", 900)
    assert (first["state"], first["value"]["headers"]) == ("resolved", {POINTER: "s2"})
    assert (second["state"], second["value"]["headers"]) == ("resolved", {POINTER: "s3"})
    assert "data" not in first["value"]
    m.tick(1899)
    assert offered(m) == []  # s3's own window is not over
    m.tick(1900)
    assert run_all(m, now=1900) == ["s3"]


def test_keys_debounce_apart(machine: Machine) -> None:
    m = machine
    declare(m, concurrency=5)
    debounced(m, "a1", "a", now=0)
    debounced(m, "b1", "b", now=100)
    debounced(m, "a2", "a", now=200)
    assert promise(m, "b1", 200)["state"] == "pending"
    m.tick(1200)
    assert sorted(run_all(m, now=1200)) == ["a2", "b1"]


def test_a_start_after_the_window_is_a_run_of_its_own(machine: Machine) -> None:
    m = machine
    declare(m, concurrency=5)
    debounced(m, "s1", "k", now=0)
    m.tick(1000)  # s1 joins the line: it is no longer superseded by later starts
    debounced(m, "s2", "k", now=1000)
    assert promise(m, "s1", 1000)["state"] == "pending"
    assert run_all(m, now=1000) == ["s1"]
    m.tick(2000)
    assert run_all(m, now=2000) == ["s2"]


def test_a_debounced_start_still_waits_for_its_queues_limits(machine: Machine) -> None:
    m = machine
    declare(m, concurrency=1)
    m.create("busy", tags={"resonate:target": TARGET, "troth:queue": "q"})
    debounced(m, "s1", "k", now=0)
    m.tick(1000)
    assert offered(m) == ["busy"]
    assert run_all(m, now=1000) == ["busy", "s1"]


def test_bad_debounce_tags_are_a_400_naming_the_tag(machine: Machine) -> None:
    m = machine
    declare(m, concurrency=1)
    base = {"resonate:target": TARGET, "troth:queue": "q"}
    for tags, named in [
        ({**base, "troth:debounce": "0"}, "troth:debounce"),
        ({**base, "troth:debounce": "soon"}, "troth:debounce"),
        ({"resonate:target": TARGET, "troth:debounce": "100"}, "troth:queue"),
        ({**base, "troth:debounce": "100", "resonate:delay": "50"}, "resonate:delay"),
    ]:
        message = refused(m, "promise.create", {"id": "x", "timeoutAt": 100_000, "tags": tags})
        assert named in message, message
