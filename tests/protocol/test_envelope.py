"""Decoding: every way a request envelope or its ``data`` earns a 400, and what decodes.

The cases come from the reference server's rules as docs/references.md states them (the
envelope, its decoding order, records, ids and origins, addresses, request kinds, search,
validation messages; the comments below name these sections), with troth's departures taken
from docs/semantics.md ("Doors (400s) in front of the machine").
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.wire import CORR, DELETE, HEAD, TARGET, VALID, Path, accept, body, mutate, refuse
from troth.protocol import (
    VERSION,
    BadRequest,
    Kind,
    PromiseState,
    SettleState,
    TaskState,
    Value,
    encode_response,
)
from troth.protocol.requests import (
    FenceAction,
    PromiseCreateRequest,
    PromiseSettleRequest,
    TaskFenceRequest,
)

I64_MAX = 2**63 - 1
MAX_MILLIS = 2**53 - 1

# docs/references.md#request-kinds: there are 26 kinds; troth adds one.
ALL_KINDS = {
    "promise.get",
    "promise.create",
    "promise.settle",
    "promise.register_callback",
    "promise.register_listener",
    "promise.search",
    "task.get",
    "task.create",
    "task.acquire",
    "task.release",
    "task.fulfill",
    "task.suspend",
    "task.fence",
    "task.heartbeat",
    "task.halt",
    "task.continue",
    "task.search",
    "schedule.get",
    "schedule.create",
    "schedule.delete",
    "schedule.search",
    "debug.start",
    "debug.stop",
    "debug.reset",
    "debug.snap",
    "debug.tick",
    # troth's extensions (docs/semantics.md, "Batched fences"; docs/queues.md).
    "task.fences",
    "queue.set",
    "queue.get",
    "queue.search",
}


def test_the_kinds_are_exactly_the_26_of_the_protocol_and_troths_extensions() -> None:
    assert set(Kind) == ALL_KINDS
    assert set(VALID) == ALL_KINDS


@pytest.mark.parametrize("kind", sorted(ALL_KINDS))
def test_the_valid_data_of_every_kind_decodes(kind: str) -> None:
    request = accept(body(kind, VALID[kind]))
    assert (request.kind, request.corr_id, request.auth, request.debug_time) == (
        kind,
        CORR,
        None,
        None,
    )
    assert isinstance(request.data, Kind(kind).data)


# -- the envelope (and decoding order, steps 1-4 and 8) ---------------------------------------


def raw(value: Any) -> bytes:
    return json.dumps(value).encode()


GET = {"id": "p"}

# (body, kind echoed, corrId echoed, text the message must contain)
ENVELOPE_400: list[Any] = [
    pytest.param(b"not json", "unknown", "0", "Invalid request envelope", id="non-json"),
    pytest.param(b"", "unknown", "0", "Invalid request envelope", id="empty-body"),
    pytest.param(b"   ", "unknown", "0", "Invalid request envelope", id="whitespace-body"),
    pytest.param(b'{"kind": "promise.get",', "unknown", "0", "Invalid", id="truncated"),
    pytest.param(b"\xff\xfe{}", "unknown", "0", "Invalid request envelope", id="not-utf8"),
    pytest.param(raw([]), "unknown", "0", "object", id="array"),
    pytest.param(raw("promise.get"), "unknown", "0", "object", id="string"),
    pytest.param(raw(42), "unknown", "0", "object", id="number"),
    pytest.param(raw(None), "unknown", "0", "object", id="null"),
    pytest.param(raw(True), "unknown", "0", "object", id="boolean"),
    pytest.param(raw({"head": HEAD, "data": GET}), "unknown", CORR, "`kind`", id="no-kind"),
    pytest.param(
        raw({"kind": "promise.get", "data": GET}), "promise.get", "0", "`head`", id="no-head"
    ),
    pytest.param(
        raw({"kind": "promise.get", "head": HEAD}), "promise.get", CORR, "`data`", id="no-data"
    ),
    pytest.param(
        raw({"kind": "promise.get", "head": {"version": VERSION}, "data": GET}),
        "promise.get",
        "0",
        "`corrId`",
        id="no-corrId",
    ),
    pytest.param(
        raw({"kind": "promise.get", "head": {"corrId": CORR}, "data": GET}),
        "promise.get",
        CORR,
        "`version`",
        id="no-version",
    ),
    pytest.param(
        raw({"kind": 5, "head": HEAD, "data": GET}), "unknown", CORR, "kind", id="kind-int"
    ),
    pytest.param(
        raw({"kind": None, "head": HEAD, "data": GET}), "unknown", CORR, "kind", id="kind-null"
    ),
    pytest.param(
        raw({"kind": ["promise.get"], "head": HEAD, "data": GET}),
        "unknown",
        CORR,
        "kind",
        id="kind-array",
    ),
    pytest.param(
        raw({"kind": "promise.get", "head": "c-1", "data": GET}),
        "promise.get",
        "0",
        "head",
        id="head-string",
    ),
    pytest.param(
        raw({"kind": "promise.get", "head": [CORR, VERSION], "data": GET}),
        "promise.get",
        "0",
        "head",
        id="head-array",
    ),
    pytest.param(
        raw({"kind": "promise.get", "head": None, "data": GET}),
        "promise.get",
        "0",
        "head",
        id="head-null",
    ),
    pytest.param(
        raw({"kind": "promise.get", "head": {"corrId": 7, "version": VERSION}, "data": GET}),
        "promise.get",
        "0",
        "corrId",
        id="corrId-int",
    ),
    pytest.param(
        raw({"kind": "promise.get", "head": {"corrId": None, "version": VERSION}, "data": GET}),
        "promise.get",
        "0",
        "corrId",
        id="corrId-null",
    ),
    pytest.param(
        raw({"kind": "promise.get", "head": {"corrId": CORR, "version": 20260401}, "data": GET}),
        "promise.get",
        CORR,
        "version",
        id="version-int",
    ),
    pytest.param(
        raw({"kind": "promise.get", "head": {**HEAD, "auth": 5}, "data": GET}),
        "promise.get",
        CORR,
        "auth",
        id="auth-int",
    ),
    pytest.param(
        raw({"kind": "promise.get", "head": {**HEAD, "resonate:debug_time": 1.0}, "data": GET}),
        "promise.get",
        CORR,
        "resonate:debug_time",
        id="debug_time-float",
    ),
    pytest.param(
        raw({"kind": "promise.get", "head": {**HEAD, "resonate:debug_time": "1"}, "data": GET}),
        "promise.get",
        CORR,
        "resonate:debug_time",
        id="debug_time-string",
    ),
    pytest.param(
        raw({"kind": "promise.get", "head": {**HEAD, "resonate:debug_time": 2**63}, "data": GET}),
        "promise.get",
        CORR,
        "resonate:debug_time",
        id="debug_time-beyond-i64",
    ),
    # decoding order, step 2: an empty kind, echoed as the empty string it was.
    pytest.param(body("", GET), "", CORR, "'kind'", id="empty-kind"),
    # decoding order, step 3: data must be an object, null included.
    pytest.param(body("promise.get", None), "promise.get", CORR, "'data'", id="data-null"),
    pytest.param(body("promise.get", []), "promise.get", CORR, "'data'", id="data-array"),
    pytest.param(body("promise.get", "p"), "promise.get", CORR, "'data'", id="data-string"),
    pytest.param(body("promise.get", 1), "promise.get", CORR, "'data'", id="data-number"),
    pytest.param(body("promise.get", False), "promise.get", CORR, "'data'", id="data-boolean"),
    # decoding order, step 4.
    pytest.param(
        body("promise.get", GET, version="2025-01-01"),
        "promise.get",
        CORR,
        "2025-01-01",
        id="old-version",
    ),
    pytest.param(
        body("promise.get", GET, version=""), "promise.get", CORR, "version", id="empty-version"
    ),
    # decoding order, step 8: unknown kinds, names compared exactly.
    pytest.param(
        body("promise.frobnicate", GET),
        "promise.frobnicate",
        CORR,
        "Unknown operation: promise.frobnicate",
        id="unknown-kind",
    ),
    pytest.param(
        body("Promise.Get", GET), "Promise.Get", CORR, "Unknown operation", id="kind-case"
    ),
    pytest.param(body("ui.get", GET), "ui.get", CORR, "Unknown operation", id="ui-kind"),
    pytest.param(
        body("task.fence ", GET), "task.fence ", CORR, "Unknown operation", id="kind-space"
    ),
]


@pytest.mark.parametrize(("raw_body", "kind", "corr_id", "text"), ENVELOPE_400)
def test_a_malformed_envelope_is_a_400_that_echoes_what_it_could_read(
    raw_body: bytes, kind: str, corr_id: str, text: str
) -> None:
    error = refuse(raw_body)
    assert (error.kind, error.corr_id) == (kind, corr_id)
    assert text in error.message


@pytest.mark.parametrize(("raw_body", "kind", "corr_id", "text"), ENVELOPE_400)
def test_the_400_answer_has_the_protocol_shape(
    raw_body: bytes, kind: str, corr_id: str, text: str
) -> None:
    """What the SDKs depend on, items 2-4: HTTP status = head.status, exactly three head
    keys, string data."""
    error = refuse(raw_body)
    wire = json.loads(encode_response(error.kind, error.corr_id, error.reply()))
    assert set(wire) == {"kind", "head", "data"}
    assert wire["kind"] == kind
    assert wire["head"] == {"corrId": corr_id, "status": 400, "version": VERSION}
    assert isinstance(wire["data"], str)
    assert wire["data"] == error.message
    assert error.reply().status == error.status == 400


def test_an_envelope_error_message_says_where_the_parser_stopped() -> None:
    # decoding order, step 1: "Invalid request envelope: <message>", the message being the parser's.
    error = refuse(b'{"kind": "promise.get", "head": {"corrId": 5')
    assert error.message.startswith("Invalid request envelope: ")
    assert len(error.message) > len("Invalid request envelope: ")


@pytest.mark.parametrize(
    ("raw_body", "text"),
    [
        # kind (step 2) is judged before data (step 3) ...
        (body("", None), "'kind'"),
        # ... data (step 3) before the version (step 4) ...
        (body("promise.get", None, version="1999-01-01"), "'data'"),
        # ... the version (step 4) before the kind being known (step 8) ...
        (body("nope", {}, version="1999-01-01"), "1999-01-01"),
        # ... and the kind being known before its data schema (step 9).
        (body("nope", {"id": 5}), "Unknown operation"),
    ],
)
def test_envelope_checks_run_in_the_reference_order(raw_body: bytes, text: str) -> None:
    assert text in refuse(raw_body).message


def test_unsupported_version_message_names_the_supported_one() -> None:
    message = refuse(body("promise.get", GET, version="2025-01-01")).message
    assert "2025-01-01" in message and VERSION in message


@pytest.mark.parametrize("depth", [2_000, 100_000])
def test_absurdly_nested_json_is_a_400_not_a_crash(depth: int) -> None:
    nested = b"[" * depth + b"]" * depth
    refuse(nested)
    refuse(b'{"kind": "promise.get", "head": {"corrId": "c", "version": "x"}, "data": ' + nested)
    # Deep nesting in an ignored key still has to be parsed past; a 400 all the same.
    refuse(body("promise.get", {"id": "p", "extra": "X"}).replace(b'"X"', nested))


def test_head_optionals_are_accepted_as_null_and_read_when_present() -> None:
    request = accept(body("promise.get", GET, auth=None, **{"resonate:debug_time": None}))
    assert (request.auth, request.debug_time) == (None, None)
    request = accept(body("promise.get", GET, auth="jwt", **{"resonate:debug_time": 1_700}))
    assert (request.auth, request.debug_time) == ("jwt", 1_700)
    request = accept(body("promise.get", GET, **{"resonate:debug_time": MAX_MILLIS}))
    assert request.debug_time == MAX_MILLIS
    # A clock reading past 2**53 would let `now + ttl` overflow a 64-bit column.
    assert "debug_time" in refuse(
        body("promise.get", GET, **{"resonate:debug_time": MAX_MILLIS + 1})
    ).message


def test_unknown_keys_are_ignored_in_the_envelope_head_and_data() -> None:
    # the envelope: unknown keys are ignored, e.g. the TS SDK's head["resonate:origin"].
    envelope = {
        "kind": "promise.get",
        "head": {**HEAD, "resonate:origin": "p", "extra": [1, {"x": None}]},
        "data": {"id": "p", "more": {"nested": True}},
        "trailer": 1.5,
    }
    request = accept(raw(envelope))
    assert request.data.id == "p"
    assert request.corr_id == CORR


def test_any_corr_id_string_is_echoed_verbatim() -> None:
    for corr_id in ["", "ü-🙂", "a" * 1000, " spaced "]:
        assert accept(body("promise.get", GET, corrId=corr_id)).corr_id == corr_id
        assert refuse(body("nope", GET, corrId=corr_id)).corr_id == corr_id


# -- data: the schema (decoding order, step 9.1) ----------------------------------------------

CREATE_IN_TASK: Path = ("action", "data")
SUSPEND_ACTION: Path = ("actions", 0)

# Every required key of every kind (request kinds), as a path into VALID[kind].
REQUIRED: list[tuple[str, Path]] = [
    ("promise.get", ("id",)),
    ("promise.create", ("id",)),
    ("promise.create", ("timeoutAt",)),
    ("promise.settle", ("id",)),
    ("promise.settle", ("state",)),
    ("promise.register_callback", ("awaited",)),
    ("promise.register_callback", ("awaiter",)),
    ("promise.register_listener", ("awaited",)),
    ("promise.register_listener", ("address",)),
    ("task.get", ("id",)),
    ("task.create", ("pid",)),
    ("task.create", ("ttl",)),
    ("task.create", ("action",)),
    ("task.create", ("action", "kind")),
    ("task.create", ("action", "head")),
    ("task.create", ("action", "data")),
    ("task.create", (*CREATE_IN_TASK, "id")),
    ("task.create", (*CREATE_IN_TASK, "timeoutAt")),
    ("task.acquire", ("id",)),
    ("task.acquire", ("version",)),
    ("task.acquire", ("pid",)),
    ("task.acquire", ("ttl",)),
    ("task.release", ("id",)),
    ("task.release", ("version",)),
    ("task.fulfill", ("id",)),
    ("task.fulfill", ("version",)),
    ("task.fulfill", ("action",)),
    ("task.fulfill", ("action", "kind")),
    ("task.fulfill", ("action", "head")),
    ("task.fulfill", ("action", "data")),
    ("task.fulfill", ("action", "data", "id")),
    ("task.fulfill", ("action", "data", "state")),
    ("task.suspend", ("id",)),
    ("task.suspend", ("version",)),
    ("task.suspend", ("actions",)),
    ("task.suspend", (*SUSPEND_ACTION, "kind")),
    ("task.suspend", (*SUSPEND_ACTION, "head")),
    ("task.suspend", (*SUSPEND_ACTION, "data")),
    ("task.suspend", (*SUSPEND_ACTION, "data", "awaited")),
    ("task.suspend", (*SUSPEND_ACTION, "data", "awaiter")),
    ("task.fence", ("id",)),
    ("task.fence", ("version",)),
    ("task.fence", ("action",)),
    ("task.fence", ("action", "kind")),
    ("task.fence", ("action", "data")),
    ("task.fence", ("action", "data", "id")),
    ("task.fence", ("action", "data", "timeoutAt")),
    ("task.heartbeat", ("pid",)),
    ("task.heartbeat", ("tasks",)),
    ("task.heartbeat", ("tasks", 0, "id")),
    ("task.heartbeat", ("tasks", 0, "version")),
    ("task.halt", ("id",)),
    ("task.continue", ("id",)),
    ("schedule.get", ("id",)),
    ("schedule.create", ("id",)),
    ("schedule.create", ("cron",)),
    ("schedule.create", ("promiseId",)),
    ("schedule.create", ("promiseTimeout",)),
    ("schedule.delete", ("id",)),
    ("debug.tick", ("time",)),
]


def where(path: Path) -> str:
    """A path as the decoder's messages write it: ``$.actions[0].data``."""
    out = "$"
    for step in path:
        out += f"[{step}]" if isinstance(step, int) else f".{step}"
    return out


@pytest.mark.parametrize(("kind", "path"), REQUIRED, ids=lambda x: str(x))
def test_a_missing_required_field_is_a_400_naming_it(kind: str, path: Path) -> None:
    error = refuse(body(kind, mutate(VALID[kind], path, DELETE)))
    assert error.kind == kind and error.corr_id == CORR
    assert f"`{path[-1]}`" in error.message
    if len(path) > 1:
        assert where(path[:-1]) in error.message


def test_optional_keys_of_nested_actions_may_be_absent_or_null() -> None:
    # request kinds: task.create's, task.fulfill's and task.suspend's action head key is
    # required but may be null; a fence's action head is optional.
    for kind, path in [
        ("task.create", ("action", "head")),
        ("task.fulfill", ("action", "head")),
        ("task.suspend", ("actions", 0, "head")),
        ("task.fence", ("action", "head")),
    ]:
        accept(body(kind, mutate(VALID[kind], path, None)))
    assert isinstance(accept(body("task.fence", VALID["task.fence"])).data, TaskFenceRequest)


# (kind, path, bad value, text the message must contain)
SCHEMA_400: list[tuple[str, Path, Any, str]] = [
    # wrong JSON types
    ("promise.get", ("id",), 5, "$.id"),
    ("promise.get", ("id",), None, "$.id"),
    ("promise.create", ("id",), ["p"], "$.id"),
    ("promise.create", ("timeoutAt",), "1000", "$.timeoutAt"),
    ("promise.create", ("timeoutAt",), True, "$.timeoutAt"),
    ("promise.create", ("timeoutAt",), None, "$.timeoutAt"),
    ("promise.create", ("param",), "x", "$.param"),
    ("promise.create", ("param",), [], "$.param"),
    ("promise.create", ("param",), {"data": {"x": 1}}, "$.param.data"),
    ("promise.create", ("param",), {"data": 1}, "$.param.data"),
    ("promise.create", ("param",), {"headers": []}, "$.param.headers"),
    ("promise.create", ("tags",), [], "$.tags"),
    ("promise.create", ("tags",), "resonate:target", "$.tags"),
    ("promise.settle", ("state",), 1, "$.state"),
    ("promise.settle", ("value",), "x", "$.value"),
    ("promise.settle", ("value",), {"data": ["x"]}, "$.value.data"),
    ("promise.register_callback", ("awaited",), 1, "$.awaited"),
    ("promise.register_listener", ("address",), {"url": TARGET}, "$.address"),
    ("promise.search", ("state",), 1, "$.state"),
    ("promise.search", ("tags",), [], "$.tags"),
    ("promise.search", ("limit",), "10", "$.limit"),
    ("promise.search", ("cursor",), 5, "$.cursor"),
    ("task.create", ("pid",), 1, "$.pid"),
    ("task.create", ("ttl",), "1000", "$.ttl"),
    ("task.create", ("action",), [], "$.action"),
    ("task.create", ("action", "kind"), 1, "$.action.kind"),
    ("task.create", ("action", "data"), "p", "$.action.data"),
    ("task.create", ("action", "data", "tags"), [], "$.action.data.tags"),
    ("task.acquire", ("version",), "0", "$.version"),
    ("task.release", ("version",), False, "$.version"),
    ("task.fulfill", ("action", "data"), [], "$.action.data"),
    ("task.fulfill", ("action", "data", "value"), [], "$.action.data.value"),
    ("task.suspend", ("actions",), {}, "$.actions"),
    ("task.suspend", ("actions", 0), "p.1", "$.actions[0]"),
    ("task.suspend", ("actions", 0, "data", "awaited"), 1, "$.actions[0].data.awaited"),
    ("task.fence", ("action",), "promise.create", "$.action"),
    ("task.fence", ("action", "kind"), 5, "$.action.kind"),
    ("task.fence", ("action", "data"), 5, "$.action.data"),
    ("task.fence", ("action", "data"), [], "$.action.data"),
    ("task.fence", ("action", "data", "timeoutAt"), "1", "$.action.data.timeoutAt"),
    ("task.heartbeat", ("tasks",), "p", "$.tasks"),
    ("task.heartbeat", ("tasks", 0), ["p", 1], "$.tasks[0]"),
    ("task.heartbeat", ("tasks", 0, "id"), 1, "$.tasks[0].id"),
    ("task.search", ("state",), 2, "$.state"),
    ("task.search", ("limit",), [10], "$.limit"),
    ("schedule.create", ("cron",), 5, "$.cron"),
    ("schedule.create", ("promiseTimeout",), "60000", "$.promiseTimeout"),
    ("schedule.create", ("promiseParam",), "x", "$.promiseParam"),
    ("schedule.create", ("promiseTags",), [], "$.promiseTags"),
    ("schedule.search", ("tags",), "x", "$.tags"),
    ("schedule.search", ("cursor",), [], "$.cursor"),
    ("debug.tick", ("time",), "1", "$.time"),
    ("debug.tick", ("time",), None, "$.time"),
    # a float where an integer belongs, even an integral one (decoding order, step 9.1)
    ("promise.create", ("timeoutAt",), 1000.0, "$.timeoutAt"),
    ("task.create", ("ttl",), 1000.0, "$.ttl"),
    ("task.create", (*CREATE_IN_TASK, "timeoutAt"), 1000.0, "$.action.data.timeoutAt"),
    ("task.acquire", ("version",), 0.0, "$.version"),
    ("task.acquire", ("ttl",), 30000.0, "$.ttl"),
    ("task.release", ("version",), 1.0, "$.version"),
    ("task.fulfill", ("version",), 1.0, "$.version"),
    ("task.suspend", ("version",), 1.0, "$.version"),
    ("task.fence", ("version",), 1.0, "$.version"),
    ("task.fence", ("action", "data", "timeoutAt"), 1000.0, "$.action.data.timeoutAt"),
    ("task.heartbeat", ("tasks", 0, "version"), 1.0, "$.tasks[0].version"),
    ("promise.search", ("limit",), 10.0, "$.limit"),
    ("task.search", ("limit",), 10.0, "$.limit"),
    ("schedule.search", ("limit",), 10.0, "$.limit"),
    ("schedule.create", ("promiseTimeout",), 60000.0, "$.promiseTimeout"),
    ("debug.tick", ("time",), 1.0, "$.time"),
    ("debug.tick", ("time",), 1.5, "$.time"),
    # integers beyond i64
    ("promise.create", ("timeoutAt",), 2**63, "$.timeoutAt"),
    ("promise.create", ("timeoutAt",), 2**100, "$.timeoutAt"),
    ("task.create", ("ttl",), 2**63, "$.ttl"),
    ("task.acquire", ("version",), 2**63, "$.version"),
    ("task.acquire", ("ttl",), 2**64, "$.ttl"),
    ("task.release", ("version",), 2**63, "$.version"),
    ("task.heartbeat", ("tasks", 0, "version"), 2**63, "$.tasks[0].version"),
    ("schedule.create", ("promiseTimeout",), 2**63, "$.promiseTimeout"),
    ("debug.tick", ("time",), 2**63, "$.time"),
    # negative times and versions, non-positive ttls
    ("promise.create", ("timeoutAt",), -1, "$.timeoutAt"),
    ("task.create", (*CREATE_IN_TASK, "timeoutAt"), -1, "$.action.data.timeoutAt"),
    ("task.fence", ("action", "data", "timeoutAt"), -1, "$.action.data.timeoutAt"),
    ("task.acquire", ("version",), -1, "$.version"),
    ("task.release", ("version",), -1, "$.version"),
    ("task.fulfill", ("version",), -1, "$.version"),
    ("task.suspend", ("version",), -1, "$.version"),
    ("task.fence", ("version",), -1, "$.version"),
    ("task.heartbeat", ("tasks", 0, "version"), -1, "$.tasks[0].version"),
    ("schedule.create", ("promiseTimeout",), -1, "$.promiseTimeout"),
    ("debug.tick", ("time",), -1, "$.time"),
    ("task.create", ("ttl",), 0, "$.ttl"),
    ("task.create", ("ttl",), -5, "$.ttl"),
    ("task.acquire", ("ttl",), 0, "$.ttl"),
    # empty strings where ids, pids, addresses and crons must be non-empty
    ("promise.get", ("id",), "", "$.id"),
    ("promise.create", ("id",), "", "$.id"),
    ("promise.settle", ("id",), "", "$.id"),
    ("promise.register_callback", ("awaited",), "", "$.awaited"),
    ("promise.register_callback", ("awaiter",), "", "$.awaiter"),
    ("promise.register_listener", ("awaited",), "", "$.awaited"),
    ("promise.register_listener", ("address",), "", "$.address"),
    ("task.get", ("id",), "", "$.id"),
    ("task.create", ("pid",), "", "$.pid"),
    ("task.create", (*CREATE_IN_TASK, "id"), "", "$.action.data.id"),
    ("task.acquire", ("id",), "", "$.id"),
    ("task.acquire", ("pid",), "", "$.pid"),
    ("task.release", ("id",), "", "$.id"),
    ("task.fulfill", ("id",), "", "$.id"),
    ("task.fulfill", ("action", "data", "id"), "", "$.action.data.id"),
    ("task.suspend", ("id",), "", "$.id"),
    ("task.suspend", (*SUSPEND_ACTION, "data", "awaited"), "", "$.actions[0].data.awaited"),
    ("task.fence", ("id",), "", "$.id"),
    ("task.fence", ("action", "data", "id"), "", "$.action.data.id"),
    ("task.heartbeat", ("pid",), "", "$.pid"),
    ("task.halt", ("id",), "", "$.id"),
    ("task.continue", ("id",), "", "$.id"),
    ("schedule.get", ("id",), "", "$.id"),
    ("schedule.create", ("id",), "", "$.id"),
    ("schedule.create", ("cron",), "", "$.cron"),
    ("schedule.create", ("promiseId",), "", "$.promiseId"),
    ("schedule.delete", ("id",), "", "$.id"),
    # enums (records): settle states and search filters
    ("promise.settle", ("state",), "pending", "$.state"),
    ("promise.settle", ("state",), "rejected_timedout", "$.state"),
    ("promise.settle", ("state",), "RESOLVED", "$.state"),
    ("promise.settle", ("state",), "", "$.state"),
    ("promise.settle", ("state",), "fulfilled", "$.state"),
    ("task.fulfill", ("action", "data", "state"), "pending", "$.action.data.state"),
    ("task.fulfill", ("action", "data", "state"), "rejected_timedout", "$.action.data.state"),
    ("promise.search", ("state",), "acquired", "$.state"),
    ("promise.search", ("state",), "Pending", "$.state"),
    ("task.search", ("state",), "resolved", "$.state"),
    # null for a defaulted object field is a 400; null for an Option is not (see below)
    ("promise.create", ("param",), None, "$.param"),
    ("promise.create", ("tags",), None, "$.tags"),
    ("promise.settle", ("value",), None, "$.value"),
    ("task.create", (*CREATE_IN_TASK, "param"), None, "$.action.data.param"),
    ("task.create", (*CREATE_IN_TASK, "tags"), None, "$.action.data.tags"),
    ("task.fulfill", ("action", "data", "value"), None, "$.action.data.value"),
    ("task.fence", ("action", "data", "tags"), None, "$.action.data.tags"),
    ("schedule.create", ("promiseParam",), None, "$.promiseParam"),
    ("schedule.create", ("promiseTags",), None, "$.promiseTags"),
    ("task.suspend", ("actions",), None, "$.actions"),
    ("task.heartbeat", ("tasks",), None, "$.tasks"),
    # tag and header values must be strings (records)
    ("promise.create", ("tags",), {"a": 1}, "$.tags"),
    ("promise.create", ("tags",), {"a": None}, "$.tags"),
    ("promise.create", ("tags",), {"a": True}, "$.tags"),
    ("promise.create", ("tags",), {"a": {"b": "c"}}, "$.tags"),
    ("promise.create", ("param",), {"headers": {"a": 1}}, "$.param.headers"),
    ("promise.settle", ("value",), {"headers": {"a": None}}, "$.value.headers"),
    ("promise.search", ("tags",), {"a": 1}, "$.tags"),
    ("task.create", (*CREATE_IN_TASK, "tags", "x"), 1, "$.action.data.tags"),
    ("schedule.create", ("promiseTags",), {"resonate:target": 5}, "$.promiseTags"),
    ("schedule.create", ("promiseParam",), {"headers": {"a": 2}}, "$.promiseParam.headers"),
    ("schedule.search", ("tags",), {"a": ["b"]}, "$.tags"),
]


@pytest.mark.parametrize(("kind", "path", "value", "text"), SCHEMA_400, ids=lambda x: str(x))
def test_a_schema_violation_is_a_400_naming_the_field(
    kind: str, path: Path, value: Any, text: str
) -> None:
    error = refuse(body(kind, mutate(VALID[kind], path, value)))
    assert (error.kind, error.corr_id) == (kind, CORR)
    assert error.message.startswith("Invalid request: ")
    assert text in error.message


def test_i64_max_is_still_an_integer() -> None:
    request = accept(body("promise.create", {"id": "p", "timeoutAt": I64_MAX}))
    assert request.data.timeout_at == I64_MAX
    request = accept(body("task.acquire", {**VALID["task.acquire"], "version": I64_MAX}))
    assert request.data.version == I64_MAX
    assert accept(body("debug.tick", {"time": MAX_MILLIS})).data.time == MAX_MILLIS


@pytest.mark.parametrize(
    ("kind", "data"),
    [
        ("promise.search", {"state": None, "tags": None, "limit": None, "cursor": None}),
        ("task.search", {"state": None, "limit": None, "cursor": None}),
        ("schedule.search", {"tags": None, "limit": None, "cursor": None}),
    ],
)
def test_null_for_an_optional_search_filter_means_absent(kind: str, data: dict[str, Any]) -> None:
    decoded = accept(body(kind, data)).data
    assert all(getattr(decoded, name) is None for name in ("limit", "cursor"))
    assert decoded == accept(body(kind, {})).data


def test_null_inside_a_value_means_absent() -> None:
    # records: a key that was absent or null in the request is stored as absent.
    data = {"id": "p", "timeoutAt": 5, "param": {"headers": None, "data": None}}
    assert accept(body("promise.create", data)).data.param == Value()
    data = {"id": "p", "state": "rejected", "value": {"headers": None, "data": "eA=="}}
    assert accept(body("promise.settle", data)).data.value == Value(data="eA==")


# -- data: the checks beyond the schema (decoding order, steps 9.2-9.3) ------------------------

ORIGIN, BRANCH, PARENT, DELAY, PREFIX = (
    "resonate:origin",
    "resonate:branch",
    "resonate:parent",
    "resonate:delay",
    "resonate:prefix",
)


def create(id: str = "p", timeout_at: int = 1000, **tags: str) -> dict[str, Any]:
    return {"id": id, "timeoutAt": timeout_at, "tags": tags}


def targeted(id: str = "p", timeout_at: int = 1000, **tags: str) -> dict[str, Any]:
    return create(id, timeout_at, **{"resonate:target": TARGET, **tags})


def task_create(data: dict[str, Any]) -> dict[str, Any]:
    return {**VALID["task.create"], "action": {"kind": "promise.create", "head": {}, "data": data}}


def fence(action_kind: str, data: Any, id: str = "p") -> dict[str, Any]:
    return {"id": id, "version": 1, "action": {"kind": action_kind, "data": data}}


def fences(*actions: tuple[str, Any], id: str = "p") -> dict[str, Any]:
    batch = [{"kind": kind, "head": {}, "data": data} for kind, data in actions]
    return {"id": id, "version": 1, "actions": batch}


def suspend(*callbacks: tuple[str, str], id: str = "p") -> dict[str, Any]:
    actions = [
        {"kind": "promise.register_callback", "head": {}, "data": {"awaited": a, "awaiter": b}}
        for a, b in callbacks
    ]
    return {"id": id, "version": 1, "actions": actions}


def schedule(id: str = "s", cron: str = "* * * * *", **tags: str) -> dict[str, Any]:
    return {**VALID["schedule.create"], "id": id, "cron": cron, "promiseTags": tags}


# (kind, data, texts the message must contain)
RULE_400: list[Any] = [
    # ids and origins, rule 1: no NUL in a created id, in every create shape
    pytest.param("promise.create", create("p\x00q"), ["id", "null"], id="nul"),
    pytest.param("task.create", task_create(targeted("p\x00")), ["action.data.id"], id="nul-tc"),
    pytest.param(
        "task.fence", fence("promise.create", create("p:\x00")), ["action.data.id"], id="nul-fence"
    ),
    # ids and origins, rules 2-4: the id equals the origin/branch/parent or lies below it; ids are
    # ``<origin>:<lineage>`` (a root's children join with ':', deeper ones with '.')
    pytest.param("promise.create", create("q", **{ORIGIN: "p"}), [ORIGIN], id="origin-other"),
    pytest.param("promise.create", create("q:1", **{ORIGIN: "p"}), [ORIGIN], id="origin-mismatch"),
    pytest.param("promise.create", create("p1", **{ORIGIN: "p"}), [ORIGIN], id="origin-nosep"),
    pytest.param("promise.create", create("p.1", **{ORIGIN: "p"}), [ORIGIN], id="origin-dot"),
    pytest.param("promise.create", create("p", **{ORIGIN: "p.1"}), [ORIGIN], id="origin-longer"),
    pytest.param("promise.create", create("p", **{ORIGIN: ""}), [ORIGIN], id="origin-empty"),
    pytest.param(
        "promise.create", create("p:1", **{ORIGIN: "p:1"}), [ORIGIN, "':'"], id="origin-colon"
    ),
    pytest.param("promise.create", create("p:1", **{BRANCH: "p:2"}), [BRANCH], id="branch"),
    pytest.param("promise.create", create("p:12", **{BRANCH: "p:1"}), [BRANCH], id="branch-nosep"),
    pytest.param("promise.create", create("p:1:2", **{BRANCH: "p:1"}), [BRANCH], id="branch-colon"),
    pytest.param("promise.create", create("p:1", **{PARENT: "q"}), [PARENT], id="parent"),
    pytest.param(
        "task.create",
        task_create(targeted("p", **{ORIGIN: "q"})),
        ["action.data.", ORIGIN],
        id="origin-tc",
    ),
    pytest.param(
        "task.fence",
        fence("promise.create", create("p:1", **{PARENT: "p:2"})),
        ["action.data.", PARENT],
        id="parent-fence",
    ),
    # ids and origins, rule 6: resonate:delay
    pytest.param("promise.create", targeted(**{DELAY: "soon"}), [DELAY], id="delay-word"),
    pytest.param("promise.create", targeted(**{DELAY: "-1"}), [DELAY], id="delay-negative"),
    pytest.param("promise.create", targeted(**{DELAY: "1.5"}), [DELAY], id="delay-float"),
    pytest.param("promise.create", targeted(**{DELAY: ""}), [DELAY], id="delay-empty"),
    pytest.param("promise.create", targeted(**{DELAY: str(2**63)}), [DELAY], id="delay-i64"),
    pytest.param(
        "promise.create", targeted(**{DELAY: "1000"}), [DELAY, "timeoutAt"], id="delay-at-timeout"
    ),
    pytest.param(
        "promise.create",
        targeted(**{DELAY: "2000"}),
        [DELAY, "timeoutAt"],
        id="delay-after-timeout",
    ),
    pytest.param(
        "promise.create", create(**{DELAY: "10"}), [DELAY, "resonate:target"], id="delay-untargeted"
    ),
    # addresses: the target must be an address troth delivers to
    pytest.param(
        "promise.create",
        targeted(**{"resonate:target": "ftp://h"}),
        ["resonate:target"],
        id="target-ftp",
    ),
    pytest.param(
        "promise.create",
        targeted(**{"resonate:target": ""}),
        ["resonate:target"],
        id="target-empty",
    ),
    pytest.param(
        "promise.create",
        targeted(**{"resonate:target": "poll://x@g"}),
        ["resonate:target"],
        id="target-cast",
    ),
    pytest.param(
        "promise.create",
        targeted(**{"resonate:target": "poll://uni@g"}),
        ["resonate:target"],
        id="target-uni-without-id",
    ),
    pytest.param(
        "task.create",
        task_create(targeted(**{"resonate:target": "gcps://p/t"})),
        ["action.data.tags", "resonate:target"],
        id="target-tc",
    ),
    pytest.param(
        "task.fence",
        fence("promise.create", targeted("p:1", **{"resonate:target": "bash://x"})),
        ["action.data.tags", "resonate:target"],
        id="target-fence",
    ),
    pytest.param(
        "promise.register_listener",
        {"awaited": "p", "address": "mailto:a@b"},
        ["listener address"],
        id="listener-mailto",
    ),
    pytest.param(
        "promise.register_listener",
        {"awaited": "p", "address": "poll://any@"},
        ["listener address"],
        id="listener-no-group",
    ),
    # promise.register_callback
    pytest.param(
        "promise.register_callback",
        {"awaited": "p", "awaiter": "p"},
        ["awaited", "awaiter", "different"],
        id="callback-self",
    ),
    pytest.param(
        "promise.register_callback",
        {"awaited": "q:1", "awaiter": "p"},
        ["origin"],
        id="callback-origin",
    ),
    pytest.param(
        "promise.register_callback",
        {"awaited": "p.1", "awaiter": "p"},
        ["origin"],
        id="callback-dotted-root",
    ),
    # task.create
    pytest.param(
        "task.create",
        task_create(create()),
        ["action.data.tags", "resonate:target"],
        id="task-untargeted",
    ),
    pytest.param(
        "task.create",
        task_create(targeted(**{DELAY: "5"})),
        ["action.data.tags", DELAY],
        id="task-delay",
    ),
    # task.fulfill
    pytest.param(
        "task.fulfill",
        mutate(VALID["task.fulfill"], ("action", "data", "id"), "q"),
        ["action.data.id", "task id"],
        id="fulfill-other",
    ),
    # task.suspend
    pytest.param("task.suspend", suspend(), ["actions", "empty"], id="suspend-empty"),
    pytest.param(
        "task.suspend", suspend(("p:1", "p:2")), ["actions[0].data.awaiter"], id="suspend-awaiter"
    ),
    pytest.param(
        "task.suspend",
        suspend(("p:1", "p"), ("p", "p")),
        ["actions[1].data.awaited"],
        id="suspend-self",
    ),
    pytest.param(
        "task.suspend",
        suspend(("q", "p")),
        ["actions[0].data.awaited", "origin"],
        id="suspend-origin",
    ),
    pytest.param(
        "task.suspend",
        suspend(("p:1", "p"), ("p.1", "p")),
        ["actions[1].data.awaited", "origin"],
        id="suspend-dotted-root",
    ),
    # task.fence
    pytest.param(
        "task.fence", fence("promise.get", {"id": "p:1"}), ["action.kind"], id="fence-kind"
    ),
    pytest.param(
        "task.fence",
        fence("promise.register_callback", {"awaited": "p:1"}),
        ["action.kind"],
        id="fence-kind-callback",
    ),
    pytest.param(
        "task.fence",
        fence("promise.create", create("p")),
        ["action.data.id"],
        id="fence-create-self",
    ),
    pytest.param(
        "task.fence",
        fence("promise.settle", {"id": "p", "state": "resolved"}),
        ["action.data.id"],
        id="fence-settle-self",
    ),
    pytest.param(
        "task.fence",
        fence("promise.settle", {"id": "p:1", "state": "pending"}),
        ["$.action.data.state"],
        id="fence-settle-pending",
    ),
    pytest.param(
        "task.fence",
        fence("promise.settle", {"id": "p:1"}),
        ["`state`", "$.action.data"],
        id="fence-settle-no-state",
    ),
    pytest.param(
        "task.fence",
        fence("promise.create", {"id": "p:1"}),
        ["`timeoutAt`", "$.action.data"],
        id="fence-create-no-timeout",
    ),
    pytest.param(
        "task.fence", fence("promise.create", None), ["$.action.data"], id="fence-data-null"
    ),
    # task.fences (troth's; docs/semantics.md, "Batched fences"): task.fence's checks, per action
    pytest.param("task.fences", fences(), ["actions must not be empty"], id="fences-empty"),
    pytest.param(
        "task.fences",
        fences(*[("promise.create", create("p:1"))] * 101),
        ["actions has 101 entries", "100"],
        id="fences-too-many",
    ),
    pytest.param(
        "task.fences",
        fences(("promise.create", create("p:1")), ("promise.get", {"id": "p:1"})),
        ["$.actions[1].kind"],
        id="fences-kind",
    ),
    pytest.param(
        "task.fences",
        fences(
            ("promise.create", create("p:1")), ("promise.settle", {"id": "p", "state": "resolved"})
        ),
        ["actions[1].data.id must not equal the task id"],
        id="fences-settle-self",
    ),
    pytest.param(
        "task.fences",
        fences(("promise.create", create("p:1")), ("promise.create", create("p:\x00"))),
        ["actions[1].data.id", "null"],
        id="fences-nul",
    ),
    pytest.param(
        "task.fences",
        fences(
            ("promise.settle", {"id": "p:1", "state": "resolved"}),
            ("promise.create", {"id": "p:2"}),
        ),
        ["`timeoutAt`", "$.actions[1].data"],
        id="fences-create-no-timeout",
    ),
    pytest.param(
        "task.fences",
        {"id": "p", "version": 1, "actions": ["promise.create"]},
        ["$.actions[0]"],
        id="fences-action-not-an-object",
    ),
    # schedule.create (request kinds, and docs/semantics.md)
    pytest.param(
        "schedule.create",
        schedule("s:1", **{"resonate:target": TARGET}),
        ["schedule id", "':'"],
        id="schedule-colon",
    ),
    pytest.param(
        "schedule.create",
        schedule(cron="not a cron", **{"resonate:target": TARGET}),
        ["cron"],
        id="cron-words",
    ),
    pytest.param(
        "schedule.create",
        schedule(cron="* * *", **{"resonate:target": TARGET}),
        ["cron"],
        id="cron-3-fields",
    ),
    pytest.param(
        "schedule.create",
        schedule(cron="61 * * * *", **{"resonate:target": TARGET}),
        ["cron"],
        id="cron-range",
    ),
    pytest.param(
        "schedule.create",
        schedule(cron="0 0 30 2 *", **{"resonate:target": TARGET}),
        ["cron"],
        id="cron-never-fires",
    ),
    pytest.param(
        "schedule.create", schedule(), ["promiseTags", "resonate:target"], id="schedule-untargeted"
    ),
    pytest.param(
        "schedule.create",
        schedule(**{"resonate:target": "nowhere"}),
        ["promiseTags", "resonate:target"],
        id="schedule-bad-target",
    ),
    # search limits
    pytest.param("promise.search", {"limit": 0}, ["limit"], id="promise-limit-0"),
    pytest.param("promise.search", {"limit": 1001}, ["limit"], id="promise-limit-1001"),
    pytest.param("task.search", {"limit": 0}, ["limit"], id="task-limit-0"),
    pytest.param("task.search", {"limit": 1001}, ["limit"], id="task-limit-1001"),
    pytest.param("schedule.search", {"limit": 0}, ["limit"], id="schedule-limit-0"),
    pytest.param("schedule.search", {"limit": 1001}, ["limit"], id="schedule-limit-1001"),
    pytest.param("schedule.search", {"limit": -1}, ["limit"], id="schedule-limit-negative"),
    pytest.param("promise.search", {"limit": 2**64}, ["limit"], id="limit-huge"),
]


@pytest.mark.parametrize(("kind", "data", "texts"), RULE_400)
def test_a_rule_violation_is_a_400_naming_the_field(
    kind: str, data: dict[str, Any], texts: list[str]
) -> None:
    error = refuse(body(kind, data))
    assert (error.kind, error.corr_id) == (kind, CORR)
    for text in texts:
        assert text in error.message


def test_several_rule_violations_are_all_reported() -> None:
    # Appendix B: "Several messages can be joined with '; '".
    message = refuse(body("promise.create", create("q\x00", **{ORIGIN: "p", DELAY: "x"}))).message
    assert message.count("; ") >= 2
    assert "null" in message and ORIGIN in message and DELAY in message


# -- what decodes, and to what ----------------------------------------------------------------


def test_promise_create_decodes_to_its_typed_values() -> None:
    data = {
        "id": "p:1",
        "timeoutAt": 1_700_000_000_000,
        "param": {"headers": {"h": "v"}, "data": "e30="},
        "tags": {ORIGIN: "p", "resonate:target": TARGET},
    }
    decoded = accept(body("promise.create", data)).data
    assert decoded == PromiseCreateRequest(
        id="p:1",
        timeout_at=1_700_000_000_000,
        param=Value(headers={"h": "v"}, data="e30="),
        tags={ORIGIN: "p", "resonate:target": TARGET},
    )


def test_absent_param_and_tags_default_to_empty() -> None:
    decoded = accept(body("promise.create", {"id": "p", "timeoutAt": 0})).data
    assert decoded.param == Value() and decoded.param.headers is None
    assert decoded.param.data is None and decoded.tags == {}


def test_present_empty_headers_are_kept_apart_from_absent_ones() -> None:
    decoded = accept(body("promise.create", {"id": "p", "timeoutAt": 0, "param": {"headers": {}}}))
    assert decoded.data.param.headers == {}


@pytest.mark.parametrize(
    ("tags", "id"),
    [
        # ids are ``<origin>:<lineage>``: a root's children join with ':', deeper ones with '.'
        ({ORIGIN: "r"}, "r:1"),
        ({ORIGIN: "r"}, "r:1.2"),
        ({BRANCH: "r:1", ORIGIN: "r"}, "r:1.2"),
        ({BRANCH: "p:1", PARENT: "p:1", ORIGIN: "p"}, "p:1.2"),
        ({BRANCH: "p:1.2", PARENT: "p:1.2", ORIGIN: "p"}, "p:1.2.3"),
        # dots are free in a root (a schedule's promises are ``<schedule>.<timestamp>``)
        ({ORIGIN: "s.1700000000000"}, "s.1700000000000"),
        ({ORIGIN: "s.1700000000000"}, "s.1700000000000:1"),
        ({ORIGIN: "p.d1a2b3"}, "p.d1a2b3"),
        ({PREFIX: "s.1700000000000"}, "anything"),
        ({ORIGIN: "p", BRANCH: "p", PARENT: "p"}, "p"),
        ({"resonate:target": TARGET, DELAY: "999"}, "p"),
        ({"resonate:target": TARGET, DELAY: "0"}, "p"),
        ({"resonate:timer": "true"}, "p"),
    ],
)
def test_creations_within_the_rules_are_accepted(tags: dict[str, str], id: str) -> None:
    decoded = accept(body("promise.create", {"id": id, "timeoutAt": 1000, "tags": tags})).data
    assert (decoded.id, decoded.tags) == (id, tags)


def test_a_fenced_create_may_carry_a_delay() -> None:
    # request kinds, task.fence: resonate:delay is allowed in a fenced create.
    data = fence("promise.create", targeted("p:1", **{DELAY: "500"}))
    decoded = accept(body("task.fence", data)).data
    assert decoded == TaskFenceRequest(
        id="p",
        version=1,
        action=FenceAction(
            "promise.create",
            PromiseCreateRequest("p:1", 1000, tags={"resonate:target": TARGET, DELAY: "500"}),
        ),
    )


def test_a_fenced_settle_decodes_to_a_settle() -> None:
    data = fence("promise.settle", {"id": "p:1", "state": "rejected_canceled"})
    data["action"]["head"] = {"corrId": "inner", "ignored": True}
    decoded = accept(body("task.fence", data)).data
    assert decoded.action.kind == "promise.settle"
    assert decoded.action.data == PromiseSettleRequest("p:1", SettleState.REJECTED_CANCELED)


@pytest.mark.parametrize("state", ["resolved", "rejected", "rejected_canceled"])
def test_every_client_settle_state_is_accepted(state: str) -> None:
    decoded = accept(body("promise.settle", {"id": "p", "state": state})).data
    assert decoded.state == SettleState(state) and decoded.value == Value()
    fulfil = mutate(VALID["task.fulfill"], ("action", "data", "state"), state)
    assert accept(body("task.fulfill", fulfil)).data.action.data.state == state


def test_search_filters_accept_every_state_of_their_record() -> None:
    for state in PromiseState:
        assert accept(body("promise.search", {"state": state.value})).data.state is state
    for state in TaskState:
        assert accept(body("task.search", {"state": state.value})).data.state is state


@pytest.mark.parametrize("limit", [1, 100, 1000])
def test_search_limits_within_bounds_are_accepted(limit: int) -> None:
    for kind in ("promise.search", "task.search", "schedule.search"):
        assert accept(body(kind, {"limit": limit, "cursor": "p"})).data.limit == limit


def test_a_heartbeat_may_be_empty_or_span_origins() -> None:
    # docs/semantics.md: tasks: [] is a 200 that does nothing; several origins are fine.
    assert accept(body("task.heartbeat", {"pid": "w", "tasks": []})).data.tasks == []
    tasks = [{"id": "a", "version": 1}, {"id": "b:1", "version": 0}, {"id": "", "version": 2}]
    decoded = accept(body("task.heartbeat", {"pid": "w", "tasks": tasks})).data
    assert [(t.id, t.version) for t in decoded.tasks] == [("a", 1), ("b:1", 0), ("", 2)]


def test_a_suspend_may_await_several_promises_of_its_origin() -> None:
    decoded = accept(body("task.suspend", suspend(("p:1", "p"), ("p:2.3", "p"), ("p:1", "p"))))
    assert [a.data.awaited for a in decoded.data.actions] == ["p:1", "p:2.3", "p:1"]


def test_register_callback_within_one_origin_is_accepted() -> None:
    decoded = accept(body("promise.register_callback", {"awaited": "p", "awaiter": "p:1"})).data
    assert (decoded.awaited, decoded.awaiter) == ("p", "p:1")


@pytest.mark.parametrize(
    "address", ["poll://any@g", "poll://any@g/w1", "poll://uni@g/w1", "http://h:8080/x"]
)
def test_listener_addresses_troth_delivers_to_are_accepted(address: str) -> None:
    decoded = accept(body("promise.register_listener", {"awaited": "p", "address": address}))
    assert decoded.data.address == address


@pytest.mark.parametrize("id", ["s", "nightly.report", "a.b.c"])
def test_schedule_ids_may_contain_dots(id: str) -> None:
    # ids.py: ':' is reserved (a schedule id is the root of the promises it fires), '.' is not
    decoded = accept(body("schedule.create", schedule(id, **{"resonate:target": TARGET}))).data
    assert decoded.id == id


@pytest.mark.parametrize("cron", ["*/5 * * * *", "0 */5 * * * *", "@daily", "0 0 * * 0,7"])
def test_schedule_create_accepts_standard_crons(cron: str) -> None:
    data = schedule(cron=cron, **{"resonate:target": TARGET})
    decoded = accept(body("schedule.create", data)).data
    assert decoded.cron == cron and decoded.promise_param == Value()
    assert decoded.promise_id == "{{.id}}.{{.timestamp}}" and decoded.promise_timeout == 60000


def test_unknown_keys_are_ignored_at_every_depth_of_data() -> None:
    data = mutate(VALID["task.create"], ("action", "data", "param"), {"data": "x", "zz": 1})
    data["action"]["head"] = {"corrId": "inner", "version": "whatever", "extra": {}}
    data["action"]["data"]["unknown"] = [None]
    data["extra"] = None
    decoded = accept(body("task.create", data)).data
    assert decoded.action.data.param == Value(data="x")
    assert decoded.action.data.tags == {"resonate:target": TARGET}


def test_debug_tick_reads_its_time() -> None:
    assert accept(body("debug.tick", {"time": 1_700_000_000_000})).data.time == 1_700_000_000_000


def test_bad_request_defaults_to_the_unknown_envelope() -> None:
    error = BadRequest("boom")
    assert (error.kind, error.corr_id, error.status, error.reply()) == (
        "unknown",
        "0",
        400,
        (400, "boom"),
    )


# troth's door (issue 34): a schedule's lineage tags obey promise.create's rule for every
# promise the schedule fires, so no schedule fires promises onto another root's branch.
LINEAGE_CASES = [
    # (promiseId, tags, accepted)
    ("{{.id}}.{{.timestamp}}", {"resonate:branch": "bank"}, False),
    ("{{.id}}.{{.timestamp}}", {"resonate:origin": "bank", "resonate:parent": "bank"}, False),
    ("bank:{{.id}}.{{.timestamp}}", {"resonate:branch": "bank"}, True),
    ("bank:{{.id}}.{{.timestamp}}", {"resonate:parent": "bank:"}, False),
    ("{{.id}}", {"resonate:origin": "s1"}, True),  # the fired id equals the tag
    ("{{.id}}:{{.timestamp}}", {"resonate:branch": "s1"}, True),
    # the timestamp is not the tag's child however it begins: "s1:1" is not an ancestor of
    # "s1:10" (it would have to be "s1:1:…"), nor of "s1:2…"
    ("{{.id}}:1{{.timestamp}}", {"resonate:branch": "s1:1"}, False),
    ("{{.id}}:{{.timestamp}}", {"resonate:branch": "s1:9"}, False),
    ("{{.id}}", {"resonate:origin": "s:1"}, False),  # ':' in an origin names no root
]


@pytest.mark.parametrize(("promise_id", "tags", "accepted"), LINEAGE_CASES)
def test_a_schedules_lineage_tags_must_be_ancestors_of_every_id_it_fires(
    promise_id: str, tags: dict[str, str], accepted: bool
) -> None:
    data = {**VALID["schedule.create"], "id": "s1", "promiseId": promise_id}
    data["promiseTags"] = {**data["promiseTags"], **tags}
    if accepted:
        assert accept(body("schedule.create", data)).kind == "schedule.create"
    else:
        message = refuse(body("schedule.create", data)).message
        assert "promiseTags" in message, message
