"""Encoding: what troth puts on the wire.

The sections named below are those of docs/references.md: what the SDKs depend on, the
envelope, records, request kinds, messages, and the snapshot.

Every expected JSON value here is written out from the reference, and compared with the
parsed output of the encoder, so key order does not matter and absence is visible.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from tests.support.wire import CORR, VALID, body
from troth.protocol import (
    VERSION,
    Kind,
    PromiseRecord,
    PromiseState,
    Reply,
    Schedule,
    TaskRecord,
    TaskState,
    Value,
    decode_request,
    encode_request,
    encode_response,
    to_builtins,
)
from troth.protocol.messages import execute_message, unblock_message
from troth.protocol.responses import (
    EMPTY,
    CallbackEntry,
    ListenerEntry,
    OutboxEntry,
    PromiseResponse,
    PromiseSearchResponse,
    PromiseTimeoutEntry,
    ScheduleResponse,
    ScheduleSearchResponse,
    ScheduleTimeoutEntry,
    TaskClaimResponse,
    TaskFenceResult,
    TaskGetResponse,
    TaskSearchResponse,
    TaskSuspendedResponse,
    TaskTimeoutEntry,
    make_snapshot,
)

PENDING = PromiseRecord(
    id="p",
    state=PromiseState.PENDING,
    param=Value(),
    value=Value(),
    tags={},
    timeout_at=2000,
    created_at=1000,
)
PENDING_JSON = {
    "id": "p",
    "state": "pending",
    "param": {},
    "value": {},
    "tags": {},
    "timeoutAt": 2000,
    "createdAt": 1000,
}
RESOLVED = PromiseRecord(
    id="p:1",
    state=PromiseState.RESOLVED,
    param=Value(headers={"h": "1"}, data="cGFyYW0="),
    value=Value(data="dmFsdWU="),
    tags={"resonate:branch": "p"},
    timeout_at=2000,
    created_at=1000,
    settled_at=1500,
)
RESOLVED_JSON = {
    "id": "p:1",
    "state": "resolved",
    "param": {"headers": {"h": "1"}, "data": "cGFyYW0="},
    "value": {"data": "dmFsdWU="},
    "tags": {"resonate:branch": "p"},
    "timeoutAt": 2000,
    "createdAt": 1000,
    "settledAt": 1500,
}


def wire(kind: str, reply: Reply, corr_id: str = CORR) -> dict[str, Any]:
    """The response envelope as a client parses it."""
    return json.loads(encode_response(kind, corr_id, reply))


def data_of(kind: str, reply: Reply) -> Any:
    envelope = wire(kind, reply)
    assert envelope["kind"] == kind
    assert envelope["head"] == {"corrId": CORR, "status": reply.status, "version": VERSION}
    return envelope["data"]


def nulls(value: Any, path: str = "$") -> list[str]:
    """Every place a JSON null occurs: what the SDKs depend on, item 1: there must be none."""
    if value is None:
        return [path]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in nulls(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in nulls(v, f"{path}[{i}]")]
    return []


# -- records ----------------------------------------------------------------------------------


def test_a_pending_promise_omits_settled_at_and_keeps_empty_param_value_and_tags() -> None:
    assert to_builtins(PENDING) == PENDING_JSON


def test_a_settled_promise_carries_every_present_field() -> None:
    assert to_builtins(RESOLVED) == RESOLVED_JSON


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (Value(), {}),
        (Value(headers={}), {"headers": {}}),
        (Value(data=""), {"data": ""}),
        (Value(headers={"a": "b"}), {"headers": {"a": "b"}}),
        (Value(headers={}, data="eA=="), {"headers": {}, "data": "eA=="}),
    ],
)
def test_a_value_keeps_exactly_the_keys_it_has(value: Value, expected: dict[str, Any]) -> None:
    # records: presence is preserved; {} stays {}; absent keys are omitted, never null.
    assert to_builtins(value) == expected


def test_a_value_round_trips_through_a_request_with_presence_preserved() -> None:
    for param in [{}, {"headers": {}}, {"data": "x"}, {"headers": {"k": "v"}, "data": ""}]:
        data = {"id": "p", "timeoutAt": 1, "param": param}
        decoded = decode_request(body("promise.create", data)).data
        assert to_builtins(decoded.param) == param


def test_a_task_without_a_lease_omits_ttl_and_pid() -> None:
    task = TaskRecord(id="p", state=TaskState.PENDING, version=0, resumes=0)
    assert to_builtins(task) == {"id": "p", "state": "pending", "version": 0, "resumes": 0}


def test_a_leased_task_carries_ttl_and_pid() -> None:
    task = TaskRecord(id="p", state=TaskState.ACQUIRED, version=1, resumes=2, ttl=30000, pid="w")
    assert to_builtins(task) == {
        "id": "p",
        "state": "acquired",
        "version": 1,
        "resumes": 2,
        "ttl": 30000,
        "pid": "w",
    }


SCHEDULE = Schedule(
    id="s",
    cron="* * * * *",
    promise_id="{{.id}}.{{.timestamp}}",
    promise_timeout=60000,
    promise_param=Value(),
    promise_tags={"resonate:target": "poll://any@g"},
    created_at=0,
    next_run_at=60000,
)
SCHEDULE_JSON = {
    "id": "s",
    "cron": "* * * * *",
    "promiseId": "{{.id}}.{{.timestamp}}",
    "promiseTimeout": 60000,
    "promiseParam": {},
    "promiseTags": {"resonate:target": "poll://any@g"},
    "createdAt": 0,
    "nextRunAt": 60000,
}


def test_a_schedule_that_never_fired_omits_last_run_at() -> None:
    assert to_builtins(SCHEDULE) == SCHEDULE_JSON


def test_a_schedule_that_fired_carries_last_run_at() -> None:
    fired = msgspec.structs.replace(SCHEDULE, last_run_at=60000, next_run_at=120000)
    assert to_builtins(fired) == {**SCHEDULE_JSON, "lastRunAt": 60000, "nextRunAt": 120000}


# -- success responses (the envelope, request kinds) ------------------------------------------


@pytest.mark.parametrize(
    ("kind", "reply", "expected"),
    [
        ("promise.get", Reply(200, PromiseResponse(PENDING)), {"promise": PENDING_JSON}),
        ("promise.settle", Reply(200, PromiseResponse(RESOLVED)), {"promise": RESOLVED_JSON}),
        (
            "promise.search",
            Reply(200, PromiseSearchResponse([PENDING])),
            {"promises": [PENDING_JSON]},
        ),
        (
            "promise.search",
            Reply(200, PromiseSearchResponse([PENDING], cursor="p")),
            {"promises": [PENDING_JSON], "cursor": "p"},
        ),
        ("task.search", Reply(200, TaskSearchResponse([])), {"tasks": []}),
        (
            "task.get",
            Reply(200, TaskGetResponse(TaskRecord("p", TaskState.SUSPENDED, 3, 0))),
            {"task": {"id": "p", "state": "suspended", "version": 3, "resumes": 0}},
        ),
        (
            "task.create",
            Reply(
                200,
                TaskClaimResponse(
                    PENDING, [RESOLVED], TaskRecord("p", TaskState.ACQUIRED, 1, 0, 5000, "w")
                ),
            ),
            {
                "task": {
                    "id": "p",
                    "state": "acquired",
                    "version": 1,
                    "resumes": 0,
                    "ttl": 5000,
                    "pid": "w",
                },
                "promise": PENDING_JSON,
                "preload": [RESOLVED_JSON],
            },
        ),
        ("schedule.get", Reply(200, ScheduleResponse(SCHEDULE)), {"schedule": SCHEDULE_JSON}),
        (
            "schedule.search",
            Reply(200, ScheduleSearchResponse([SCHEDULE], cursor="s")),
            {"schedules": [SCHEDULE_JSON], "cursor": "s"},
        ),
        ("schedule.search", Reply(200, ScheduleSearchResponse([])), {"schedules": []}),
        ("task.release", Reply(200, EMPTY), {}),
        ("task.heartbeat", Reply(200, EMPTY), {}),
        ("debug.tick", Reply(200, []), []),
    ],
)
def test_success_bodies_have_the_reference_shape(kind: str, reply: Reply, expected: Any) -> None:
    data = data_of(kind, reply)
    assert data == expected
    assert nulls(data) == []


def test_a_suspend_that_finds_a_settled_promise_answers_300_with_only_a_preload() -> None:
    # the envelope: task.suspend's 300 answers {"preload": […]} as its data, not a message.
    data = data_of("task.suspend", Reply(300, TaskSuspendedResponse([RESOLVED])))
    assert data == {"preload": [RESOLVED_JSON]}


def test_a_fence_body_nests_the_inner_reply_under_the_outer_corr_id() -> None:
    # request kinds, task.fence: the inner head carries the OUTER corrId; the inner action's
    # own head is ignored.
    result = TaskFenceResult("promise.create", Reply(200, PromiseResponse(PENDING)), [RESOLVED])
    envelope = wire("task.fence", Reply(200, result), corr_id="outer-7")
    assert envelope == {
        "kind": "task.fence",
        "head": {"corrId": "outer-7", "status": 200, "version": VERSION},
        "data": {
            "action": {
                "kind": "promise.create",
                "head": {"corrId": "outer-7", "status": 200, "version": VERSION},
                "data": {"promise": PENDING_JSON},
            },
            "preload": [RESOLVED_JSON],
        },
    }


def test_a_fenced_settle_of_a_missing_promise_is_an_inner_404_in_an_outer_200() -> None:
    result = TaskFenceResult("promise.settle", Reply(404), [])
    data = data_of("task.fence", Reply(200, result))
    assert data == {
        "action": {
            "kind": "promise.settle",
            "head": {"corrId": CORR, "status": 404, "version": VERSION},
            "data": "Promise not found",
        },
        "preload": [],
    }


# -- error responses (what the SDKs depend on, item 4; the envelope) ---------------------------

# The messages the reference sends for each kind's handler statuses; SDKs do not parse
# them, but they are what a user reads.
REFERENCE_MESSAGES = [
    ("promise.get", 404, "Promise not found"),
    ("promise.settle", 404, "Promise not found"),
    ("promise.register_callback", 404, "Awaited promise not found"),
    ("promise.register_listener", 404, "Awaited promise not found"),
    ("task.get", 404, "Task not found"),
    ("task.create", 409, "Already exists"),
    ("task.create", 422, "The promise does not have a resonate:target tag"),
    ("task.acquire", 404, "Task not found"),
    ("task.release", 404, "Task not found"),
    ("task.fulfill", 404, "Task not found"),
    ("task.suspend", 404, "Task not found"),
    ("task.suspend", 422, "Awaited promise not found"),
    ("task.fence", 404, "Task not found"),
    ("task.halt", 404, "Task not found"),
    ("task.halt", 409, "Task is fulfilled"),
    ("task.continue", 404, "Task not found"),
    ("task.continue", 409, "Task is not halted"),
    ("schedule.get", 404, "Schedule not found"),
    ("schedule.delete", 404, "Schedule not found"),
]


@pytest.mark.parametrize(("kind", "status", "message"), REFERENCE_MESSAGES)
def test_a_bodiless_error_gets_its_kinds_message(kind: str, status: int, message: str) -> None:
    assert data_of(kind, Reply(status)) == message


@pytest.mark.parametrize("kind", sorted(Kind))
@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 422, 500])
def test_every_error_status_of_every_kind_has_a_string_data(kind: str, status: int) -> None:
    data = data_of(kind, Reply(status))
    assert isinstance(data, str) and data


def test_an_error_with_its_own_message_keeps_it() -> None:
    assert data_of("debug.tick", Reply(403, "Debug operations are disabled")) == (
        "Debug operations are disabled"
    )
    assert data_of("promise.get", Reply(500, "Internal error: disk full")) == (
        "Internal error: disk full"
    )


def test_an_unknown_kind_still_gets_a_string_error() -> None:
    envelope = wire("nope", Reply(400, "Unknown operation: nope"))
    assert envelope["kind"] == "nope" and envelope["data"] == "Unknown operation: nope"
    assert isinstance(wire("nope", Reply(500))["data"], str)


# -- messages and the snapshot ----------------------------------------------------------------


def test_an_execute_message_carries_the_server_url_and_the_current_version() -> None:
    message = execute_message("p1", 3, "http://localhost:8001")
    assert to_builtins(message) == {
        "kind": "execute",
        "head": {"serverUrl": "http://localhost:8001"},
        "data": {"task": {"id": "p1", "version": 3}},
    }


def test_an_execute_message_without_a_server_url_still_has_a_head() -> None:
    # what the SDKs depend on, item 5: the TS SDK drops a message without a head; the
    # snapshot: "head": {} there.
    assert to_builtins(execute_message("p1", 0)) == {
        "kind": "execute",
        "head": {},
        "data": {"task": {"id": "p1", "version": 0}},
    }


def test_an_unblock_message_carries_the_promise_record_and_an_empty_head() -> None:
    assert to_builtins(unblock_message(RESOLVED)) == {
        "kind": "unblock",
        "head": {},
        "data": {"promise": RESOLVED_JSON},
    }


def test_a_snapshot_uses_the_reference_keys_and_orders() -> None:
    snapshot = make_snapshot(
        promises=[RESOLVED, PENDING],
        promise_timeouts=[PromiseTimeoutEntry("q", 9), PromiseTimeoutEntry("p", 2000)],
        callbacks=[CallbackEntry("p", "p:2"), CallbackEntry("p", "p:1")],
        listeners=[ListenerEntry("p", "poll://any@b"), ListenerEntry("p", "poll://any@a")],
        tasks=[TaskRecord("q", TaskState.PENDING, 0, 0), TaskRecord("p", TaskState.HALTED, 1, 1)],
        task_timeouts=[TaskTimeoutEntry("q", 0, 5), TaskTimeoutEntry("p", 1, 7)],
        messages=[
            OutboxEntry("poll://any@b", unblock_message(PENDING)),
            OutboxEntry("poll://any@a", unblock_message(PENDING)),
            OutboxEntry("poll://any@g", execute_message("q", 0)),
        ],
        schedules=[SCHEDULE],
        schedule_timeouts=[ScheduleTimeoutEntry("s", 60000)],
    )
    assert to_builtins(snapshot) == {
        "promises": [PENDING_JSON, RESOLVED_JSON],
        "promiseTimeouts": [{"id": "p", "timeout": 2000}, {"id": "q", "timeout": 9}],
        "callbacks": [{"awaiter": "p", "awaited": "p:1"}, {"awaiter": "p", "awaited": "p:2"}],
        "listeners": [
            {"id": "p", "address": "poll://any@a"},
            {"id": "p", "address": "poll://any@b"},
        ],
        "tasks": [
            {"id": "p", "state": "halted", "version": 1, "resumes": 1},
            {"id": "q", "state": "pending", "version": 0, "resumes": 0},
        ],
        "taskTimeouts": [
            {"id": "p", "type": 1, "timeout": 7},
            {"id": "q", "type": 0, "timeout": 5},
        ],
        "messages": [
            {
                "address": "poll://any@g",
                "message": {
                    "kind": "execute",
                    "head": {},
                    "data": {"task": {"id": "q", "version": 0}},
                },
            },
            {
                "address": "poll://any@a",
                "message": {"kind": "unblock", "head": {}, "data": {"promise": PENDING_JSON}},
            },
            {
                "address": "poll://any@b",
                "message": {"kind": "unblock", "head": {}, "data": {"promise": PENDING_JSON}},
            },
        ],
        "schedules": [SCHEDULE_JSON],
        "scheduleTimeouts": [{"id": "s", "timeout": 60000}],
    }


# -- requests: troth's own client encoding ----------------------------------------------------


@pytest.mark.parametrize("kind", sorted(VALID))
def test_encode_request_round_trips_through_decode_request(kind: str) -> None:
    request = decode_request(body(kind, VALID[kind]))
    again = decode_request(encode_request(kind, request.data, CORR, "jwt", 1_700))
    assert again == request._replace(auth="jwt", debug_time=1_700)
    assert decode_request(encode_request(kind, request.data, CORR)) == request


def test_an_encoded_request_has_the_envelope_shape_and_no_nulls() -> None:
    request = decode_request(body("task.fence", VALID["task.fence"]))
    sent = json.loads(encode_request("task.fence", request.data, "c-9"))
    assert sent == {
        "kind": "task.fence",
        "head": {"corrId": "c-9", "version": VERSION},
        "data": {
            "id": "p",
            "version": 1,
            "action": {"kind": "promise.create", "data": {"id": "p:1", "timeoutAt": 1000}},
        },
    }
    assert nulls(sent) == []
    get = decode_request(body("promise.get", VALID["promise.get"])).data
    with_head = json.loads(encode_request("promise.get", get, "c", "tok", 5))
    assert with_head["head"] == {
        "corrId": "c",
        "version": VERSION,
        "auth": "tok",
        "resonate:debug_time": 5,
    }
