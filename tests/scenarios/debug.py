"""Scenarios for the debug kinds of docs/semantics.md (not in Lean)."""

from __future__ import annotations

from .build import Machine, call, ok, plain, schedule_create, snap, spawn, state, tick


def scenario_debug_start_and_stop_change_nothing(m: Machine) -> None:
    """debug.start / debug.stop: ``{}``; state untouched.

    The promise is plain (no task, no timeout row) and its deadline far off: on a live server
    ``debug.stop`` resumes the wall-clock timeouts loop, which would at once fire any deadline
    set at these 1970 instants, a change that is the loop's doing, not debug.stop's.
    """
    plain(m, "p", 10**13, now=0)
    before = snap(m)
    assert ok(m, "debug.start", {}, 1) == {}
    assert ok(m, "debug.stop", {}, 2) == {}
    assert snap(m) == before


def scenario_debug_reset_empties_everything(m: Machine) -> None:
    """debug.reset: ``{}``; every part of the snapshot is empty afterwards."""
    spawn(m, "p", 100_000, now=0)
    ok(m, "schedule.create", schedule_create("s", "* * * * *", "{{.id}}", 1), 0)
    assert ok(m, "debug.reset", {}, 1) == {}
    assert snap(m) == state()


def scenario_debug_tick_refuses_a_debug_time_other_than_its_time(m: Machine) -> None:
    """debug.tick: ``resonate:debug_time`` must equal ``data.time`` → 400, nothing fires."""
    spawn(m, "p", 1000, now=0)
    before = snap(m)
    status, body = call(m, "debug.tick", {"time": 2000}, 1999)
    assert (status, body) == (400, "resonate:debug_time must equal data.time")
    assert snap(m) == before
    tick(m, 2000)
    assert snap(m)["promises"][0]["state"] == "rejected_timedout"
