"""Scenarios for Lean's ``enqueueResume``, reached through each settlement site.

``spec/02-actions/00-resume.lean``; see docs/references.md#the-abstract-machine.

The ``fulfilled`` branch (and a missing awaiter task) cannot be reached through the
protocol: the settlement scrub removes a settled awaiter from every pending promise's
callbacks, and only targeted promises (which have tasks) can register as awaiters.
tests/oracle/test_branches.py covers it on the oracle directly.
"""

from __future__ import annotations

from .build import (
    TARGETED,
    TTL,
    Machine,
    R,
    acquire,
    callback,
    claim,
    execute,
    fulfill,
    lease,
    leased,
    ok,
    park,
    plain,
    promise,
    retry,
    settle,
    snap,
    spawn,
    state,
    task,
    task_id,
    timeout,
)


def scenario_resume_wakes_a_suspended_awaiter(m: Machine) -> None:
    """00-resume: ``.suspended`` → pending (version kept), resumes = [awaited], retry at
    now+R, execute at the current version to the awaiter's target."""
    claim(m, "p", 100_000, now=0)
    plain(m, "p:1", 100_000, now=0)
    park(m, "p", 1, 10, "p:1")
    ok(m, "promise.settle", settle("p:1"), 20)
    assert snap(m) == state(
        promises=[
            promise("p", "pending", 100_000, 0, tags=TARGETED),
            promise("p:1", "resolved", 100_000, 0, settled_at=20),
        ],
        promiseTimeouts=[timeout("p", 100_000)],
        tasks=[task("p", "pending", 1, resumes=1)],
        taskTimeouts=[retry("p", 20 + R)],
        messages=[execute("p", 1)],
    )


def scenario_resume_records_on_a_pending_awaiter(m: Machine) -> None:
    """00-resume: ``.pending`` → awaited appended to resumes; nothing else written."""
    spawn(m, "p", 100_000, now=0)
    plain(m, "p:1", 100_000, now=0)
    ok(m, "promise.register_callback", callback("p:1", "p"), 1)
    ok(m, "promise.settle", settle("p:1"), 2)
    s = snap(m)
    assert s["tasks"] == [task("p", "pending", 0, resumes=1)]
    assert s["taskTimeouts"] == [retry("p", R)]
    assert s["messages"] == [execute("p", 0)]


def scenario_resume_records_on_an_acquired_awaiter(m: Machine) -> None:
    """00-resume: ``.acquired`` → resumes appended; the lease is untouched, no message."""
    claim(m, "p", 100_000, now=0)
    plain(m, "p:1", 100_000, now=0)
    ok(m, "promise.register_callback", callback("p:1", "p"), 1)
    ok(m, "promise.settle", settle("p:1"), 2)
    s = snap(m)
    assert s["tasks"] == [leased("p", 1, resumes=1)]
    assert s["taskTimeouts"] == [lease("p", TTL)]
    assert s["messages"] == []


def scenario_resume_records_on_a_halted_awaiter(m: Machine) -> None:
    """00-resume: ``.halted`` → resumes appended; it stays halted, no timeout, no message."""
    claim(m, "p", 100_000, now=0)
    plain(m, "p:1", 100_000, now=0)
    park(m, "p", 1, 1, "p:1")
    ok(m, "task.halt", task_id("p"), 2)
    ok(m, "promise.settle", settle("p:1"), 3)
    s = snap(m)
    assert s["tasks"] == [task("p", "halted", 1, resumes=1)]
    assert s["taskTimeouts"] == []
    assert s["messages"] == []


def scenario_resume_collects_a_second_awaited_on_a_woken_task(m: Machine) -> None:
    """00-resume: the first settlement wakes the task; the second finds it pending and only
    appends (no new execute, retry unchanged)."""
    claim(m, "p", 100_000, now=0)
    plain(m, "p:1", 100_000, now=0)
    plain(m, "p:2", 100_000, now=0)
    park(m, "p", 1, 10, "p:1", "p:2")
    ok(m, "promise.settle", settle("p:1"), 20)
    ok(m, "promise.settle", settle("p:2"), 30)
    s = snap(m)
    assert s["tasks"] == [task("p", "pending", 1, resumes=2)]
    assert s["taskTimeouts"] == [retry("p", 20 + R)]
    assert s["messages"] == [execute("p", 1)]


def scenario_resume_wakes_an_awaiter_past_its_own_deadline(m: Machine) -> None:
    """00-resume: no awaiter-deadline guard — a suspended task whose promise is dead (but not
    yet timed out) is re-pended and sent."""
    claim(m, "p", 1000, now=0)
    plain(m, "p:1", 100_000, now=0)
    park(m, "p", 1, 10, "p:1")
    ok(m, "promise.settle", settle("p:1"), 2000)
    s = snap(m)
    assert s["tasks"] == [task("p", "pending", 1, resumes=1)]
    assert s["taskTimeouts"] == [retry("p", 2000 + R)]
    assert s["messages"] == [execute("p", 1)]


def scenario_resume_is_cleared_when_the_woken_task_is_acquired(m: Machine) -> None:
    """00-resume then T-03-task.acquire: acquiring clears the buffered resumes."""
    claim(m, "p", 100_000, now=0)
    plain(m, "p:1", 100_000, now=0)
    park(m, "p", 1, 10, "p:1")
    ok(m, "promise.settle", settle("p:1"), 20)
    body = ok(m, "task.acquire", acquire("p", 1), 30)
    assert body["task"] == leased("p", 2)


def scenario_resume_from_task_fulfill_wakes_the_parent(m: Machine) -> None:
    """T-07-task.fulfill's tail → 00-resume: the child's fulfilment wakes the suspended
    parent."""
    claim(m, "p", 100_000, now=0)
    claim(m, "p:1", 100_000, now=0)
    park(m, "p", 1, 10, "p:1")
    ok(m, "task.fulfill", fulfill("p:1", 1), 20)
    s = snap(m)
    assert s["tasks"] == [task("p", "pending", 1, resumes=1), task("p:1", "fulfilled", 1)]
    assert s["taskTimeouts"] == [retry("p", 20 + R)]
    assert s["messages"] == [execute("p", 1)]
    assert s["callbacks"] == []


def scenario_resume_wakes_every_awaiter_of_one_promise(m: Machine) -> None:
    """P-03-promise.settle → 00-resume once per callback: two suspended awaiters, two
    executes."""
    claim(m, "p", 100_000, now=0)
    claim(m, "p:2", 100_000, now=0)
    plain(m, "p:1", 100_000, now=0)
    park(m, "p", 1, 10, "p:1")
    park(m, "p:2", 1, 10, "p:1")
    ok(m, "promise.settle", settle("p:1"), 20)
    s = snap(m)
    assert s["tasks"] == [
        task("p", "pending", 1, resumes=1),
        task("p:2", "pending", 1, resumes=1),
    ]
    assert s["messages"] == [execute("p", 1), execute("p:2", 1)]
