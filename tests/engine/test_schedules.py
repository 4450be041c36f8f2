"""schedule.get/create/delete and the schedule timeout with catch-up."""

from __future__ import annotations

from tests.engine.machine import TARGET, Machine

MINUTE = 60_000
EVERY_5 = "*/5 * * * *"


def create_schedule(machine: Machine, now: int = 0, promise_timeout: int = 1000) -> dict:
    data = {
        "id": "s",
        "cron": EVERY_5,
        "promiseId": "{{.id}}.{{.timestamp}}",
        "promiseTimeout": promise_timeout,
        "promiseTags": {"resonate:target": TARGET},
    }
    return machine.ok("schedule.create", data, now)["schedule"]


def test_create_arms_the_first_fire_and_fires_nothing(machine: Machine) -> None:
    schedule = create_schedule(machine, now=MINUTE)
    assert (schedule["createdAt"], schedule["nextRunAt"]) == (MINUTE, 5 * MINUTE)
    assert "lastRunAt" not in schedule
    snap = machine.snap()
    assert snap["scheduleTimeouts"] == [{"id": "s", "timeout": 5 * MINUTE}]
    assert snap["promises"] == []


def test_create_of_an_existing_schedule_answers_it_unchanged(machine: Machine) -> None:
    first = create_schedule(machine)
    assert create_schedule(machine, now=7 * MINUTE, promise_timeout=5) == first


def test_get_and_delete(machine: Machine) -> None:
    assert machine.call("schedule.get", {"id": "s"})[0] == 404
    assert machine.call("schedule.delete", {"id": "s"})[0] == 404
    schedule = create_schedule(machine)
    assert machine.ok("schedule.get", {"id": "s"})["schedule"] == schedule
    assert machine.call("schedule.delete", {"id": "s"}) == (200, {})
    snap = machine.snap()
    assert snap["schedules"] == snap["scheduleTimeouts"] == []


def test_a_late_fire_creates_every_missed_occurrence_as_of_its_own_instant(
    machine: Machine,
) -> None:
    create_schedule(machine)
    machine.tick(15 * MINUTE)
    snap = machine.snap()
    promises = {p["id"]: p for p in snap["promises"]}
    assert sorted(promises) == ["s.300000", "s.600000", "s.900000"]
    first = promises["s.300000"]
    assert (first["createdAt"], first["timeoutAt"]) == (5 * MINUTE, 5 * MINUTE + 1000)
    # Deadlines the catch-up armed that were already due fired in the same tick.
    assert (first["state"], first["settledAt"]) == ("rejected_timedout", 5 * MINUTE + 1000)
    assert promises["s.900000"]["state"] == "pending"
    schedule = machine.ok("schedule.get", {"id": "s"})["schedule"]
    assert (schedule["lastRunAt"], schedule["nextRunAt"]) == (15 * MINUTE, 20 * MINUTE)
    assert snap["scheduleTimeouts"] == [{"id": "s", "timeout": 20 * MINUTE}]


def test_a_deleted_schedule_fires_no_more(machine: Machine) -> None:
    create_schedule(machine)
    machine.ok("schedule.delete", {"id": "s"})
    assert machine.tick(60 * MINUTE) == 0
    assert machine.snap()["promises"] == []
