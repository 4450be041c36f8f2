"""Scenarios for S-01..S-03 and the schedule transition (``onScheduleTimeout``, ``catchUp``).

The cron ``* * * * *`` fires every minute: ``nextCron(c, 0) = 60000``, then every 60000 ms.
"""

from __future__ import annotations

from .build import (
    TARGETED,
    Machine,
    R,
    execute,
    ok,
    promise,
    retry,
    schedule,
    schedule_create,
    snap,
    state,
    status,
    task,
    tick,
    timeout,
)

EVERY_MINUTE = "* * * * *"
TEMPLATE = "{{.id}}.{{.timestamp}}"
HOUR = 3_600_000


def scenario_schedule_get_answers_404_for_an_unknown_schedule(m: Machine) -> None:
    """S-01-schedule.get: absent → 404."""
    assert status(m, "schedule.get", {"id": "s"}, 0) == 404


def scenario_schedule_create_arms_the_first_fire(m: Machine) -> None:
    """S-02-schedule.create: new → createdAt now, nextRunAt = nextCron(cron, now), no
    lastRunAt, schedule timeout at nextRunAt; nothing fires yet."""
    body = ok(m, "schedule.create", schedule_create("s", EVERY_MINUTE, TEMPLATE, HOUR), 1000)
    expected = schedule("s", EVERY_MINUTE, TEMPLATE, HOUR, 1000, 60_000)
    assert body == {"schedule": expected}
    assert snap(m) == state(schedules=[expected], scheduleTimeouts=[timeout("s", 60_000)])


def scenario_schedule_get_answers_the_stored_schedule(m: Machine) -> None:
    """S-01-schedule.get: present → the stored schedule."""
    ok(m, "schedule.create", schedule_create("s", EVERY_MINUTE, TEMPLATE, HOUR), 0)
    body = ok(m, "schedule.get", {"id": "s"}, 10)
    assert body == {"schedule": schedule("s", EVERY_MINUTE, TEMPLATE, HOUR, 0, 60_000)}


def scenario_schedule_create_of_an_existing_schedule_answers_it_unchanged(m: Machine) -> None:
    """S-02-schedule.create: exists → the stored schedule; the request is not compared."""
    ok(m, "schedule.create", schedule_create("s", EVERY_MINUTE, TEMPLATE, HOUR), 0)
    before = snap(m)
    body = ok(m, "schedule.create", schedule_create("s", "0 * * * *", "other", 5), 10)
    assert body == {"schedule": schedule("s", EVERY_MINUTE, TEMPLATE, HOUR, 0, 60_000)}
    assert snap(m) == before


def scenario_schedule_delete_answers_404_for_an_unknown_schedule(m: Machine) -> None:
    """S-03-schedule.delete: absent → 404."""
    assert status(m, "schedule.delete", {"id": "s"}, 0) == 404


def scenario_schedule_delete_removes_it_but_keeps_its_promises(m: Machine) -> None:
    """S-03-schedule.delete: ``delSchedule`` and ``delScheduleTimeout``; fired promises stay."""
    ok(m, "schedule.create", schedule_create("s", EVERY_MINUTE, TEMPLATE, HOUR), 0)
    tick(m, 60_000)
    assert ok(m, "schedule.delete", {"id": "s"}, 70_000) == {}
    s = snap(m)
    assert s["schedules"] == []
    assert s["scheduleTimeouts"] == []
    assert [p["id"] for p in s["promises"]] == ["s.60000"]
    assert status(m, "schedule.get", {"id": "s"}, 70_001) == 404


def scenario_schedule_timeout_creates_one_occurrence(m: Machine) -> None:
    """02-timeouts onScheduleTimeout/catchUp: one due occurrence → ``promiseCreate`` at
    now = cronTime with the expanded id, timeoutAt = cronTime + promiseTimeout and the tags
    unchanged; lastRunAt/nextRunAt advance; the timeout is re-armed."""
    tags = {**TARGETED, "app": "billing"}
    ok(m, "schedule.create", schedule_create("s", EVERY_MINUTE, TEMPLATE, HOUR, tags), 0)
    tick(m, 60_000)
    assert snap(m) == state(
        promises=[promise("s.60000", "pending", 60_000 + HOUR, 60_000, tags=tags)],
        promiseTimeouts=[timeout("s.60000", 60_000 + HOUR)],
        tasks=[task("s.60000", "pending", 0)],
        taskTimeouts=[retry("s.60000", 60_000 + R)],
        messages=[execute("s.60000", 0)],
        schedules=[schedule("s", EVERY_MINUTE, TEMPLATE, HOUR, 0, 120_000, 60_000, tags)],
        scheduleTimeouts=[timeout("s", 120_000)],
    )


def scenario_schedule_timeout_fires_nothing_before_the_next_run(m: Machine) -> None:
    """02-timeouts: the schedule timeout is not due before nextRunAt."""
    ok(m, "schedule.create", schedule_create("s", EVERY_MINUTE, TEMPLATE, HOUR), 0)
    before = snap(m)
    tick(m, 59_999)
    assert snap(m) == before


def scenario_schedule_catch_up_creates_every_missed_occurrence(m: Machine) -> None:
    """02-timeouts catchUp: three missed occurrences, each created at its own instant. Their
    retries at c+R that are already due fire in the same tick and re-arm at time+R."""
    ok(m, "schedule.create", schedule_create("s", EVERY_MINUTE, TEMPLATE, HOUR), 0)
    tick(m, 180_000)
    s = snap(m)
    # ids sort as strings: s.120000 < s.180000 < s.60000
    assert s["promises"] == [
        promise("s.120000", "pending", 120_000 + HOUR, 120_000, tags=TARGETED),
        promise("s.180000", "pending", 180_000 + HOUR, 180_000, tags=TARGETED),
        promise("s.60000", "pending", 60_000 + HOUR, 60_000, tags=TARGETED),
    ]
    ids = ["s.120000", "s.180000", "s.60000"]
    assert s["tasks"] == [task(i, "pending", 0) for i in ids]
    assert s["taskTimeouts"] == [retry(i, 185_000) for i in ids]
    assert s["messages"] == [execute(i, 0) for i in ids]
    assert s["schedules"] == [schedule("s", EVERY_MINUTE, TEMPLATE, HOUR, 0, 240_000, 180_000)]
    assert s["scheduleTimeouts"] == [timeout("s", 240_000)]


def scenario_schedule_catch_up_times_out_occurrences_within_the_tick(m: Machine) -> None:
    """02-timeouts catchUp + onPromiseTimeout: occurrences whose deadline (c + 30000) passed
    by the tick time are timed out in the same tick, at their own deadlines."""
    ok(m, "schedule.create", schedule_create("s", EVERY_MINUTE, TEMPLATE, 30_000), 0)
    tick(m, 180_000)
    s = snap(m)
    assert s["promises"] == [
        promise(
            "s.120000", "rejected_timedout", 150_000, 120_000, tags=TARGETED, settled_at=150_000
        ),
        promise("s.180000", "pending", 210_000, 180_000, tags=TARGETED),
        promise("s.60000", "rejected_timedout", 90_000, 60_000, tags=TARGETED, settled_at=90_000),
    ]
    assert s["promiseTimeouts"] == [timeout("s.180000", 210_000)]
    assert s["tasks"] == [
        task("s.120000", "fulfilled", 0),
        task("s.180000", "pending", 0),
        task("s.60000", "fulfilled", 0),
    ]
    assert s["taskTimeouts"] == [retry("s.180000", 185_000)]


def scenario_schedule_occurrence_with_zero_timeout_is_born_timed_out(m: Machine) -> None:
    """02-timeouts catchUp → P-02 dead birth: promiseTimeout 0 gives timeoutAt = cronTime =
    now, so the promise is rejected_timedout with a fulfilled task and no execute."""
    ok(m, "schedule.create", schedule_create("s", EVERY_MINUTE, TEMPLATE, 0), 0)
    tick(m, 60_000)
    s = snap(m)
    assert s["promises"] == [
        promise("s.60000", "rejected_timedout", 60_000, 60_000, tags=TARGETED, settled_at=60_000)
    ]
    assert s["tasks"] == [task("s.60000", "fulfilled", 0)]
    assert s["taskTimeouts"] == []
    assert s["messages"] == []


def scenario_schedule_occurrence_adopts_an_existing_promise(m: Machine) -> None:
    """02-timeouts catchUp → P-02 existing: a template without the timestamp names one
    promise; the second occurrence finds it and writes nothing."""
    ok(m, "schedule.create", schedule_create("s", EVERY_MINUTE, "{{.id}}.run", HOUR), 0)
    tick(m, 120_000)
    s = snap(m)
    assert s["promises"] == [promise("s.run", "pending", 60_000 + HOUR, 60_000, tags=TARGETED)]
    assert s["taskTimeouts"] == [retry("s.run", 120_000 + R)]
    assert s["schedules"] == [schedule("s", EVERY_MINUTE, "{{.id}}.run", HOUR, 0, 180_000, 120_000)]
