"""Every per-branch scenario against a fresh oracle, and the branches the protocol cannot reach.

The scenarios (tests/scenarios) go through ``Oracle.apply`` and so through troth's doors.
Some Lean branches sit behind those doors (a task without its promise, a self-callback, an
empty suspend) or need a state no request sequence builds; those are driven here on the
oracle's handlers and state directly, with expectations read off the Lean text.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.scenarios import ALL, Scenario
from tests.scenarios.build import TARGETED, W, create, envelope, execute
from troth.oracle import Oracle
from troth.oracle.promises import promise_register_callback, promise_settle
from troth.oracle.resume import enqueue_resume
from troth.oracle.state import (
    LEASE,
    RETRY,
    OutboxEntry,
    PromiseObject,
    ServerState,
    TaskObject,
    TaskTimeout,
)
from troth.oracle.tasks import (
    task_acquire,
    task_continue,
    task_create,
    task_fence,
    task_fulfill,
    task_get,
    task_release,
    task_suspend,
)
from troth.oracle.timeouts import (
    on_promise_timeout,
    on_schedule_timeout,
    on_task_lease_timeout,
    on_task_retry_timeout,
)
from troth.protocol import requests as rq
from troth.protocol import to_builtins
from troth.protocol.messages import execute_message, unblock_message
from troth.protocol.records import PromiseState, TaskState, Value
from troth.protocol.responses import EMPTY, Reply


@pytest.mark.parametrize("scenario", ALL, ids=lambda f: f.__name__.removeprefix("scenario_"))
def test_branch(scenario: Scenario) -> None:
    scenario(Oracle())


def test_there_are_well_over_eighty_scenarios_with_distinct_names() -> None:
    names = [f.__name__ for f in ALL]
    assert len(names) == len(set(names)) > 80
    assert all(f.__doc__ for f in ALL)


# -- helpers --------------------------------------------------------------------------------


def _promise(id: str, timeout_at: int = 100_000, **tags: str) -> PromiseObject:
    return PromiseObject(
        id=id,
        state=PromiseState.PENDING,
        param=Value(),
        tags={f"resonate:{k}": v for k, v in tags.items()},
        timeout_at=timeout_at,
        created_at=0,
    )


def _acquired(id: str) -> TaskObject:
    return TaskObject(id=id, state=TaskState.ACQUIRED, version=1, ttl=10, pid="w")


def _settle_action(id: str) -> rq.SettleAction:
    return rq.SettleAction("promise.settle", {}, rq.PromiseSettleRequest(id, "resolved"))


# -- the guard's "promise missing" step ------------------------------------------------------


def _orphan() -> ServerState:
    """A task whose promise does not exist (no request sequence builds this)."""
    s = ServerState()
    s.set_task(_acquired("p"))
    return s


@pytest.mark.parametrize(
    ("handler", "request_"),
    [
        (task_acquire, rq.TaskAcquireRequest("p", 1, "w", 10)),
        (
            task_fence,
            rq.TaskFenceRequest(
                "p", 1, rq.FenceAction("promise.settle", rq.PromiseSettleRequest("x", "resolved"))
            ),
        ),
        (task_suspend, rq.TaskSuspendRequest("p", 1, [])),
        (task_fulfill, rq.TaskFulfillRequest("p", 1, _settle_action("p"))),
        (task_release, rq.TaskReleaseRequest("p", 1)),
    ],
)
def test_guard_answers_409_when_the_task_has_no_promise(handler, request_) -> None:
    """T-03/T-04/T-06/T-07/T-08 guard step 2: ``getPromise t.id`` none → 409, no write."""
    s = _orphan()
    assert handler(s, request_, 0) == Reply(409)
    assert s == _orphan()


def test_task_get_answers_404_when_the_task_has_no_promise() -> None:
    """T-01-task.get: the promise lookup failing is a 404 (not 409)."""
    assert task_get(_orphan(), rq.TaskGetRequest("p"), 0) == Reply(404)


def test_task_continue_answers_404_when_the_halted_task_has_no_promise() -> None:
    """T-10-task.continue: halted, then ``getPromise`` none → 404, no write."""
    s = ServerState()
    s.set_task(TaskObject("p", TaskState.HALTED, 2))
    assert task_continue(s, rq.TaskContinueRequest("p"), 0) == Reply(404)
    assert s.tasks == [TaskObject("p", TaskState.HALTED, 2)]


def test_task_create_answers_409_for_a_targeted_promise_without_a_task() -> None:
    """T-02-task.create: promise exists with a target but ``getTask`` none → 409."""
    s = ServerState()
    s.set_promise(_promise("p", target=W))
    action = rq.CreateAction("promise.create", {}, rq.PromiseCreateRequest("p", 100_000))
    assert task_create(s, rq.TaskCreateRequest("w", 10, action), 0) == Reply(409)


# -- enqueueResume branches behind the doors ------------------------------------------------


def test_resume_of_a_fulfilled_awaiter_changes_nothing() -> None:
    """00-resume ``.fulfilled`` → pure (): reached by a self-callback, which Lean accepts."""
    s = ServerState()
    s.set_promise(_promise("p", target=W))
    s.set_task(_acquired("p"))
    callback = rq.PromiseRegisterCallbackRequest(awaited="p", awaiter="p")
    assert promise_register_callback(s, callback, 0).status == 200
    assert s.get_promise("p").callbacks == ("p",)
    promise_settle(s, rq.PromiseSettleRequest("p", "resolved"), 5)
    # The tail fulfilled the task first, so the self-resume found it fulfilled.
    assert s.get_task("p") == TaskObject("p", TaskState.FULFILLED, 1)
    assert s.task_timeouts == [] and s.outbox == []


def test_resume_without_an_awaiter_task_changes_nothing() -> None:
    """00-resume: ``getTask awaiterId`` none → pure ()."""
    s = ServerState()
    enqueue_resume(s, "a", "w", 0)
    assert s == ServerState()


def test_resume_does_not_record_the_same_awaited_twice() -> None:
    """00-resume: ``t.resumes.contains awaitedId`` → pure ()."""
    s = ServerState()
    s.set_task(replace(_acquired("w"), resumes=("a",)))
    enqueue_resume(s, "a", "w", 0)
    assert s.get_task("w").resumes == ("a",)


def test_resume_of_a_suspended_awaiter_without_promise_sends_nothing() -> None:
    """00-resume: the state change does not need the awaiter promise; the message does."""
    s = ServerState()
    s.set_task(TaskObject("w", TaskState.SUSPENDED, 3))
    enqueue_resume(s, "a", "w", 100)
    assert s.get_task("w") == TaskObject("w", TaskState.PENDING, 3, resumes=("a",))
    assert s.task_timeouts == [TaskTimeout("w", RETRY, 5100)]
    assert s.outbox == []


def test_resume_of_a_suspended_awaiter_with_an_empty_target_sends_nothing() -> None:
    """00-resume: ``target != ""`` guards the execute."""
    s = ServerState()
    s.set_promise(_promise("w", target=""))
    s.set_task(TaskObject("w", TaskState.SUSPENDED, 3))
    enqueue_resume(s, "a", "w", 100)
    assert s.get_task("w").state == TaskState.PENDING
    assert s.outbox == []


def test_empty_suspend_parks_the_task_with_no_callbacks() -> None:
    """T-06-task.suspend: an empty action list suspends (doors refuse it on the wire)."""
    s = ServerState()
    s.set_promise(_promise("p", target=W))
    s.set_task(_acquired("p"))
    assert task_suspend(s, rq.TaskSuspendRequest("p", 1, []), 0) == Reply(200, EMPTY)
    assert s.get_task("p") == TaskObject("p", TaskState.SUSPENDED, 1)


# -- timeout transitions that find nothing to do --------------------------------------------


def test_timeout_transitions_on_missing_objects_change_nothing() -> None:
    s = ServerState()
    on_promise_timeout(s, "p", 0)
    on_task_retry_timeout(s, "p", 0)
    on_task_lease_timeout(s, "p", 0)
    on_schedule_timeout(s, "s", 0)
    assert s == ServerState()


def test_promise_timeout_of_a_settled_promise_changes_nothing() -> None:
    s = ServerState()
    s.set_promise(replace(_promise("p"), state=PromiseState.RESOLVED, settled_at=1))
    before = replace(s, promises=list(s.promises))
    on_promise_timeout(s, "p", 200_000)
    assert s == before


def test_retry_timeout_of_a_task_that_is_not_pending_changes_nothing() -> None:
    s = ServerState()
    s.set_promise(_promise("p", target=W))
    s.set_task(_acquired("p"))
    s.set_task_timeout("p", RETRY, 7)
    on_task_retry_timeout(s, "p", 10)
    assert s.task_timeouts == [TaskTimeout("p", RETRY, 7)]
    assert s.outbox == []


def test_retry_and_lease_timeouts_without_a_promise_send_nothing() -> None:
    """02-timeouts: ``getPromise t.id`` none → the timeout is re-armed but no execute."""
    s = ServerState()
    s.set_task(TaskObject("p", TaskState.PENDING, 0))
    on_task_retry_timeout(s, "p", 10)
    assert s.task_timeouts == [TaskTimeout("p", RETRY, 5010)]
    s.set_task(_acquired("q"))
    on_task_lease_timeout(s, "q", 20)
    assert s.get_task("q") == TaskObject("q", TaskState.PENDING, 1)
    assert s.outbox == []


def test_lease_timeout_of_a_task_that_is_not_acquired_changes_nothing() -> None:
    s = ServerState()
    s.set_task(TaskObject("p", TaskState.SUSPENDED, 1))
    on_task_lease_timeout(s, "p", 10)
    assert s.tasks == [TaskObject("p", TaskState.SUSPENDED, 1)]


# -- debug.tick's stale entries -------------------------------------------------------------


def test_tick_drops_a_stale_retry_of_a_task_that_is_not_pending() -> None:
    """A retry row left by nothing Lean does: it fires, changes nothing, and is dropped."""
    oracle = Oracle()
    oracle.state.set_promise(_promise("p", target=W))
    oracle.state.set_task(_acquired("p"))
    oracle.state.set_task_timeout("p", RETRY, 50)
    oracle.tick(100)
    assert oracle.state.task_timeouts == []
    assert oracle.state.get_task("p") == _acquired("p")


def test_tick_with_zero_retry_timeout_ends() -> None:
    """With R = 0 a retry re-arms itself at the tick time: unchanged, so dropped."""
    oracle = Oracle(retry_timeout=0)
    oracle.state.set_promise(_promise("p", target=W))
    oracle.state.set_task(_acquired("p"))
    oracle.state.set_task_timeout("p", LEASE, 30)
    oracle.tick(30)
    assert oracle.state.get_task("p") == TaskObject("p", TaskState.PENDING, 1)
    assert oracle.state.task_timeouts == []
    assert oracle.state.outbox == [OutboxEntry(W, execute_message("p", 1))]


# -- state effects --------------------------------------------------------------------------


def test_outbox_keys_executes_by_task_and_unblocks_by_promise_and_address() -> None:
    s = ServerState()
    s.set_message("a", execute_message("t", 0))
    s.set_message("b", execute_message("t", 1))  # same task: replaces, whatever the address
    record = _promise("p").to_record()
    s.set_message("a", unblock_message(record))
    s.set_message("b", unblock_message(record))
    assert [e.key for e in s.outbox] == ["p:notify:b", "p:notify:a", "t"]
    assert s.outbox[-1] == OutboxEntry("b", execute_message("t", 1))


def test_task_timeouts_are_keyed_by_id_and_kind() -> None:
    s = ServerState()
    s.set_task_timeout("t", RETRY, 1)
    s.set_task_timeout("t", LEASE, 2)
    s.set_task_timeout("t", RETRY, 3)
    assert s.task_timeouts == [TaskTimeout("t", RETRY, 3), TaskTimeout("t", LEASE, 2)]
    s.del_task_timeout("t")
    assert s.task_timeouts == []


def test_upserts_put_the_newest_row_first() -> None:
    s = ServerState()
    s.set_promise(_promise("a"))
    s.set_promise(_promise("b"))
    s.set_promise(replace(_promise("a"), timeout_at=5))
    assert [(p.id, p.timeout_at) for p in s.promises] == [("a", 5), ("b", 100_000)]


# -- the Oracle's surface -------------------------------------------------------------------


def test_a_request_without_debug_time_runs_at_the_last_now() -> None:
    oracle = Oracle()
    oracle.apply(envelope("promise.create", {"id": "p", "timeoutAt": 1000}, 900))
    response = oracle.apply(envelope("promise.get", {"id": "p"}))
    assert response["data"]["promise"]["state"] == "pending"
    oracle.apply(envelope("promise.get", {"id": "p"}, 1000))
    response = oracle.apply(envelope("promise.get", {"id": "p"}))
    assert response["data"]["promise"]["state"] == "rejected_timedout"


def test_the_first_request_without_debug_time_runs_at_zero() -> None:
    oracle = Oracle()
    oracle.apply(envelope("promise.create", {"id": "p", "timeoutAt": 1}))
    assert oracle.state.get_promise("p").created_at == 0


def test_retry_timeout_is_configurable() -> None:
    oracle = Oracle(retry_timeout=30_000)
    oracle.apply(envelope("promise.create", create("p", 99_000, TARGETED), 10))
    assert oracle.state.task_timeouts == [TaskTimeout("p", RETRY, 30_010)]


def test_a_bad_request_is_a_400_that_changes_nothing() -> None:
    oracle = Oracle()
    response = oracle.apply(envelope("promise.create", {"id": "p"}, 5))
    assert response["head"]["status"] == 400
    assert isinstance(response["data"], str) and "timeoutAt" in response["data"]
    assert oracle.state == ServerState()
    assert oracle.now == 0


def test_messages_are_in_wire_shape_and_snapshot_order() -> None:
    oracle = Oracle()
    oracle.apply(envelope("promise.create", create("b", 99, TARGETED), 0))
    oracle.apply(envelope("promise.create", create("a", 99, TARGETED), 0))
    assert [to_builtins(e) for e in oracle.messages()] == [execute("a", 0), execute("b", 0)]
