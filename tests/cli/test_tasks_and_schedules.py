"""``troth tasks`` on the task of an execution no worker has taken yet (its group has no
worker), and ``troth schedules``: each action's effect read back, and its errors."""

from __future__ import annotations

import pytest


def pending_execution(troth, place, id: str) -> None:
    """An execution whose task waits: its group has no worker."""
    ran = troth("invoke", "nobody.fn", "--id", id, "--target", "idle", *place.flags)
    assert ran.code == 0, ran.err


def test_halt_stops_a_task_and_continue_lets_it_run_again(troth, place):
    pending_execution(troth, place, "job-1")
    got = troth("tasks", "get", "job-1", "--json", *place.flags)
    assert (got.code, got.json["state"]) == (0, "pending")
    halted = troth("tasks", "halt", "job-1", "--json", *place.flags)
    assert (halted.code, halted.json["state"]) == (0, "halted")
    listed = troth("tasks", "search", "--state", "halted", "--json", *place.flags).json
    assert "job-1" in [t["id"] for t in listed["tasks"]]
    resumed = troth("tasks", "continue", "job-1", "--json", *place.flags)
    assert (resumed.code, resumed.json["state"]) == (0, "pending")
    table = troth("tasks", "get", "job-1", *place.flags)
    assert "job-1" in table.out and "pending" in table.out


def test_continue_on_a_task_that_is_not_halted_is_a_conflict(troth, place):
    pending_execution(troth, place, "job-2")
    ran = troth("tasks", "continue", "job-2", *place.flags)
    assert ran.code == 6
    assert len(ran.err.splitlines()) == 1 and "job-2" in ran.err
    assert troth("tasks", "get", "job-2", "--json", *place.flags).json["state"] == "pending"


def test_an_unknown_task_is_exit_5(troth, place):
    for action in ("get", "halt", "continue"):
        ran = troth("tasks", action, "no-such-task", *place.flags)
        assert (ran.code, ran.err) == (5, "troth: task 'no-such-task': not found\n")


def test_a_schedule_is_created_read_searched_and_deleted(troth, place):
    made = troth("schedules", "create", "nightly", "--cron", "0 3 * * *", "--func", "report",
                 "--arg", '"eu"', "--target", "reports", "--tag", "team=ops", "--json",
                 *place.flags)  # fmt: skip
    assert made.code == 0, made.err
    schedule = made.json
    # What app.schedules.create makes: the invocation, routed to the group.
    assert schedule["promiseParam"]["data"] == {"func": "report", "args": ["eu"]}
    assert schedule["promiseTags"]["resonate:target"] == "poll://any@reports"
    assert schedule["promiseTags"]["team"] == "ops"
    got = troth("schedules", "get", "nightly", "--json", *place.flags).json
    assert got["cron"] == "0 3 * * *" and got["nextRunAt"] > got["createdAt"]
    found = troth("schedules", "search", "--tag", "team=ops", "--json", *place.flags).json
    assert [s["id"] for s in found["schedules"]] == ["nightly"]
    assert "nightly" in troth("schedules", "search", *place.flags).out
    deleted = troth("schedules", "delete", "nightly", *place.flags)
    assert deleted.code == 0 and "deleted" in deleted.out
    assert troth("schedules", "get", "nightly", *place.flags).code == 5
    again = troth("schedules", "delete", "nightly", *place.flags)
    assert (again.code, again.err) == (5, "troth: schedule 'nightly': not found\n")


def test_a_bad_cron_is_refused_by_the_server_as_invalid(troth, place):
    ran = troth("schedules", "create", "bad", "--cron", "every day", "--func", "f", *place.flags)
    assert ran.code == 2
    assert len(ran.err.splitlines()) == 1 and "cron" in ran.err.lower()
    assert troth("schedules", "get", "bad", *place.flags).code == 5


def test_waiting_on_a_halted_execution_is_exit_1_saying_how_to_resume_it(troth, place):
    pending_execution(troth, place, "job-3")
    assert troth("tasks", "halt", "job-3", *place.flags).code == 0
    ran = troth("invoke", "nobody.fn", "--id", "job-3", "--target", "idle", "--wait",
                *place.flags)  # fmt: skip
    assert ran.code == 1
    assert ran.err.startswith("troth: execution 'job-3' is halted")
    assert "troth tasks continue job-3" in ran.err and len(ran.err.splitlines()) == 1


@pytest.mark.slow  # waits out a one-second deadline
def test_an_execution_past_its_timeout_is_exit_1(troth, place):
    ran = troth("invoke", "nobody.fn", "--id", "late-1", "--target", "idle", "--timeout", "1s",
                "--wait", "--json", *place.flags)  # fmt: skip
    assert ran.code == 1
    assert ran.err == "troth: execution 'late-1' rejected_timedout\n"
    promise = ran.json
    assert promise["state"] == "rejected_timedout"
    # A second from when the command built the request, which the server received a moment later.
    assert 500 <= promise["timeoutAt"] - promise["createdAt"] <= 1000
