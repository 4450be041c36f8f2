"""A schedule's catch-up in chunks, and the catch-up window (docs/semantics.md, "Schedule
catch-up").

Chunks only split the work: the same requests and ticks must leave the engine, whatever
its chunk size, in the state the oracle's one-shot ``catchUp`` (Lean's) reaches. The
window, an operator's choice, skips occurrences older than it instead of creating them.
"""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path
from typing import Any

import pytest

from tests.engine.machine import TARGET, Machine, R
from troth.engine.store import Timeout, TimeoutKind
from troth.engine.timeouts import CATCH_UP_CHUNK, CatchUp, fire
from troth.oracle import Oracle
from troth.protocol.envelope import VERSION, to_builtins
from troth.storage.sqlite import SqliteService

SECOND = 1000
TIMER = {"resonate:timer": "true"}
HOUR = 3_600_000


class ChunkedMachine(Machine):
    """The engine on SQLite, catching up by ``policy``."""

    def __init__(self, path: Path, policy: CatchUp) -> None:
        self.loop = asyncio.new_event_loop()
        self.service = SqliteService(str(path), retry_timeout=R, catch_up=policy)


def schedule(
    id: str, cron: str, promise_id: str, promise_timeout: int, **tags: str
) -> dict[str, Any]:
    return {
        "id": id,
        "cron": cron,
        "promiseId": promise_id,
        "promiseTimeout": promise_timeout,
        "promiseParam": {"data": id},
        "promiseTags": {"resonate:target": TARGET, **tags},
    }


# Schedules owing thousands of occurrences, of every kind a catch-up meets, beside other
# deadlines that fall inside the backlog; then ticks (None) at the times given.
STEPS: list[tuple[str | None, dict[str, Any], int]] = [
    ("schedule.create", schedule("sec", "* * * * * *", "{{.id}}.{{.timestamp}}", HOUR), 0),
    # Occurrences that time out within the catch-up, while later ones are pending.
    ("schedule.create", schedule("ten", "*/10 * * * * *", "ten.{{.timestamp}}", 25_000), 0),
    # Born dead (promiseTimeout 0); one id for every occurrence (created once); timers.
    ("schedule.create", schedule("dead", "*/7 * * * * *", "{{.id}}.{{.timestamp}}", 0), 0),
    ("schedule.create", schedule("same", "*/3 * * * * *", "{{.id}}", 40_000), 0),
    ("schedule.create", schedule("nap", "*/5 * * * * *", "nap.{{.timestamp}}", 2000, **TIMER), 0),
    # Deadlines of other objects in the middle of the backlog.
    ("promise.create", {"id": "p", "timeoutAt": 345_678, "tags": {}}, 0),
    (
        "task.create",
        {
            "pid": "w",
            "ttl": 600_000,
            "action": {
                "kind": "promise.create",
                "head": {},
                "data": {"id": "t", "timeoutAt": 1_234_567, "tags": {"resonate:target": TARGET}},
            },
        },
        0,
    ),
    (None, {}, 700_000),  # 700 missed occurrences of "sec" alone
    ("schedule.delete", {"id": "ten"}, 700_500),
    (None, {}, 1_500_000),
]


@functools.cache
def oracle_run() -> list[Any]:
    """What the oracle answers to each step: a response, or the snapshot after a tick."""
    oracle = Oracle(retry_timeout=R)
    answers: list[Any] = []
    for n, (kind, data, now) in enumerate(STEPS):
        if kind is None:
            oracle.tick(now)
            answers.append(to_builtins(oracle.snapshot()))
            continue
        head = {"corrId": f"c{n}", "version": VERSION, "resonate:debug_time": now}
        reply = oracle.apply({"kind": kind, "head": head, "data": data})
        answers.append((reply["head"]["status"], reply["data"]))
    return answers


@pytest.mark.slow  # seconds: the oracle's one-shot catch-up of 1,500 occurrences, then ours
@pytest.mark.parametrize("chunk", [1, 7, CATCH_UP_CHUNK])
def test_a_chunked_catch_up_ends_where_the_oracles_one_shot_catch_up_does(
    tmp_path: Path, chunk: int
) -> None:
    machine = ChunkedMachine(tmp_path / "troth.db", CatchUp(chunk=chunk))
    try:
        for (kind, data, now), theirs in zip(STEPS, oracle_run(), strict=True):
            if kind is None:
                machine.tick(now)
                assert machine.snap() == theirs, f"after the tick at {now}"
            else:
                assert machine.call(kind, data, now) == theirs
                assert theirs[0] == 200, theirs
        snap = machine.snap()
        assert len([p for p in snap["promises"] if p["id"].startswith("sec.")]) == 1500
        (sec,) = [s for s in snap["schedules"] if s["id"] == "sec"]
        assert (sec["lastRunAt"], sec["nextRunAt"]) == (1_500_000, 1_501_000)
    finally:
        machine.close()


def test_a_chunk_leaves_the_schedule_armed_at_its_next_missed_occurrence(
    tmp_path: Path,
) -> None:
    """Between chunks the schedule is consistent: its timeout at its nextRunAt, due."""
    machine = ChunkedMachine(tmp_path / "troth.db", CatchUp(chunk=10))
    try:
        machine.ok("schedule.create", schedule("s", "* * * * * *", "s.{{.timestamp}}", HOUR), 0)

        # One transition, as one slice of a sweep would run it.
        async def one_firing() -> None:
            await machine.service._write(
                lambda store: fire(
                    store, Timeout(1000, TimeoutKind.SCHEDULE, "s"), 100_000, CatchUp(chunk=10)
                )
            )

        machine.run(one_firing())
        snap = machine.snap()
        assert len(snap["promises"]) == 10
        assert snap["scheduleTimeouts"] == [{"id": "s", "timeout": 11_000}]
        (s,) = snap["schedules"]
        assert (s["lastRunAt"], s["nextRunAt"]) == (10_000, 11_000)
    finally:
        machine.close()


# -- the catch-up window ----------------------------------------------------------------------


def test_occurrences_older_than_the_window_are_skipped(tmp_path: Path) -> None:
    machine = ChunkedMachine(tmp_path / "troth.db", CatchUp(window=10 * SECOND, chunk=4))
    try:
        machine.ok("schedule.create", schedule("s", "* * * * * *", "s.{{.timestamp}}", HOUR), 0)
        machine.tick(100_500)
        snap = machine.snap()
        # Every occurrence at or after 100_500 - 10_000, and none before.
        created = sorted(int(p["id"].split(".")[1]) for p in snap["promises"])
        assert created == list(range(91_000, 100_001, SECOND))
        assert all(p["createdAt"] == int(p["id"].split(".")[1]) for p in snap["promises"])
        (s,) = snap["schedules"]
        assert (s["lastRunAt"], s["nextRunAt"]) == (100_000, 101_000)
        assert snap["scheduleTimeouts"] == [{"id": "s", "timeout": 101_000}]
    finally:
        machine.close()


def test_an_occurrence_exactly_window_old_is_created(tmp_path: Path) -> None:
    machine = ChunkedMachine(tmp_path / "troth.db", CatchUp(window=10 * SECOND))
    try:
        machine.ok("schedule.create", schedule("s", "* * * * * *", "s.{{.timestamp}}", HOUR), 0)
        machine.tick(100_000)
        assert len(machine.snap()["promises"]) == 11  # 90_000 .. 100_000
    finally:
        machine.close()


def test_with_no_occurrence_inside_the_window_none_is_created(tmp_path: Path) -> None:
    machine = ChunkedMachine(tmp_path / "troth.db", CatchUp(window=10 * 60 * SECOND))
    try:
        machine.ok("schedule.create", schedule("s", "0 * * * *", "s.{{.timestamp}}", HOUR), 0)
        machine.tick(2 * HOUR + HOUR // 2)  # missed 1 h and 2 h: both over 10 min old
        snap = machine.snap()
        assert snap["promises"] == []
        (s,) = snap["schedules"]
        assert "lastRunAt" not in s  # nothing ran
        assert s["nextRunAt"] == 3 * HOUR
        assert snap["scheduleTimeouts"] == [{"id": "s", "timeout": 3 * HOUR}]
    finally:
        machine.close()


def test_an_occurrence_on_time_is_created_whatever_the_window(tmp_path: Path) -> None:
    machine = ChunkedMachine(tmp_path / "troth.db", CatchUp(window=0))
    try:
        machine.ok("schedule.create", schedule("s", "* * * * * *", "s.{{.timestamp}}", HOUR), 0)
        machine.tick(1000)
        assert [p["id"] for p in machine.snap()["promises"]] == ["s.1000"]
    finally:
        machine.close()


def test_the_policy_refuses_a_negative_window_or_an_empty_chunk() -> None:
    with pytest.raises(ValueError):
        CatchUp(window=-1)
    with pytest.raises(ValueError):
        CatchUp(chunk=0)
