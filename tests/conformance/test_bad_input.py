"""Bad input against the live server: a clear 4xx, nothing written, and the server serves on.

The protocol's own fuzz tests (tests/protocol/test_fuzz.py) prove that the decoder answers a
request or a ``BadRequest`` for anything; these send the same kinds of damage through the
whole stack (uvicorn, body limit, envelope, handler, storage) and judge what a client sees:

- never a 5xx: a 500 would mean some input escaped every door;
- a 400 answers an envelope whose ``data`` is a non-empty message, with HTTP status =
  ``head.status``; an oversized body is a 413 before any decoding;
- a 400 or 413 leaves ``debug.snap`` exactly as it was;
- the next valid request is answered normally.

Each example starts from the same small state (a task acquired at version 1, a plain promise
in its origin, a schedule) so that the valid requests the mutations start from name objects
that exist, and a mutation that slips through the doors reaches a handler's real branches.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, currently_in_test_context, event, given, settings
from hypothesis import strategies as st

from tests.support.fuzzing import json_values, keys, mutated
from tests.support.wire import DELETE, HEAD, VALID, mutate
from troth.protocol import Kind

from ._client import MAX_BODY_BYTES, HttpMachine

# Slow: hypothesis drives a troth serve process for seconds a test (tests/protocol: in-process).
pytestmark = pytest.mark.slow

FUZZ = settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
FAR = 10**13  # deadlines the seeded state never reaches
AWAITED = VALID["promise.register_callback"]["awaited"]  # the task's child, in its origin

# Values that break ids, tags, addresses, crons and numbers in the ways clients do.
NASTY: list[Any] = [
    "", " ", "\x00", "p\x00", "p\x00.1", "\ud800", "é", "p.é", "🙂" * 40, "p" * 5000,
    "p/../q", "p\n", "poll://", "poll://any@", "poll://uni@g", "poll://any@g/", "poll://x@g",
    "http://", "https://:0", "mailto:x@y", "javascript:alert(1)", "{{.id}}", "* * *",
    "61 * * * *", "@never", "resolved ", "RESOLVED", "rejected_timedout", "pending",
    0, -1, 2**53, 2**63, -(2**63) - 1, 10**400, 1.5, -0.0, 1e308, True, None, [], {},
    {"resonate:target": 1}, {"resonate:target": "mailto:x"}, {"": ""}, {"\x00": "\x00"},
]  # fmt: skip
# The fields that carry ids, tags, addresses and the like, wherever they sit.
SENSITIVE = {
    "id", "awaited", "awaiter", "address", "pid", "ttl", "version", "timeoutAt", "state",
    "tags", "cron", "promiseId", "promiseTimeout", "promiseTags", "time", "limit", "cursor",
    "resonate:target", "kind", "tasks", "actions", "action", "param", "value", "data",
}  # fmt: skip


def envelope(kind: Any, data: Any, head: Any = None) -> dict[str, Any]:
    return {"kind": kind, "head": HEAD if head is None else head, "data": data}


def dumps(value: Any) -> bytes:
    return json.dumps(value).encode()


def paths(value: Any, prefix: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    """Every path to a value under a sensitive key (or in a list under one)."""
    found = []
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, child in items:
        path = (*prefix, key)
        if key in SENSITIVE or isinstance(key, int):
            found.append(path)
        if isinstance(child, dict | list) and child:
            found += paths(child, path)
    return found


@st.composite
def nasty_fields(draw: st.DrawFn) -> bytes:
    """A valid request of any kind with one or two sensitive fields made nasty or removed."""
    kind = draw(st.sampled_from(sorted(Kind)))
    data = VALID[kind]
    for _ in range(draw(st.integers(1, 2))):
        targets = paths(data)
        if not targets:
            data = mutate(data, (draw(keys),), draw(st.sampled_from(NASTY)))
            continue
        path = draw(st.sampled_from(targets))
        value = draw(st.sampled_from([*NASTY, DELETE]) | json_values)
        if value is DELETE and isinstance(path[-1], int):
            value = None
        data = mutate(data, path, value)
    return dumps(envelope(kind, data))


@st.composite
def mutated_requests(draw: st.DrawFn) -> bytes:
    kind, data = draw(mutated())
    return dumps(envelope(kind, data))


@st.composite
def broken_heads(draw: st.DrawFn) -> bytes:
    """A valid body under a head (or kind) that is wrong."""
    kind = draw(st.sampled_from(sorted(Kind)))
    head: Any = dict(HEAD)
    field = draw(st.sampled_from(["corrId", "version", "resonate:debug_time", "auth"]))
    value = draw(st.sampled_from([*NASTY, DELETE]) | json_values)
    if value is DELETE:
        head.pop(field, None)
    else:
        head[field] = value
    head = draw(st.just(head) | json_values)
    kind = draw(st.just(kind) | st.sampled_from(NASTY) | st.text(max_size=20))
    data = VALID[kind] if isinstance(kind, str) and kind in VALID else {}
    return dumps(envelope(kind, data, head))


@st.composite
def deep(draw: st.DrawFn) -> bytes:
    """Nesting deep enough to overflow a recursive decoder, inside the body limit."""
    # Shallow (a wrong type) or deep (past any recursion limit); 6 bytes a level at most.
    depth = draw(st.integers(1, 64) | st.integers(1_000, (MAX_BODY_BYTES - 200) // 6))
    opener = draw(st.sampled_from([b"[", b'{"a":']))
    closer = b"]" if opener == b"[" else b"}"
    nested = opener * depth + b"1" + closer * depth
    where = draw(st.sampled_from(["body", "data", "param", "tags"]))
    if where == "body":
        return nested
    if where == "data":
        return b'{"kind":"promise.get","head":' + dumps(HEAD) + b',"data":' + nested + b"}"
    field = b'"param":{"data":' if where == "param" else b'"tags":{"t":'
    return (
        b'{"kind":"promise.create","head":' + dumps(HEAD)
        + b',"data":{"id":"q","timeoutAt":1,' + field + nested + b"}}}"
    )  # fmt: skip


@st.composite
def raw_bodies(draw: st.DrawFn) -> bytes:
    """Not an envelope at all: bytes, truncated JSON, JSON of the wrong shape."""
    valid = dumps(envelope("promise.get", {"id": "p"}))
    return draw(
        st.binary(max_size=300)
        | st.text(max_size=100).map(lambda t: t.encode("utf-8", "surrogatepass"))
        | st.integers(0, len(valid) - 1).map(lambda n: valid[:n])
        | json_values.map(dumps)
        | st.just(b'{"kind":"promise.get","kind":"x","head":' + dumps(HEAD) + b',"data":{}}')
    )


def sized_body(size: int) -> bytes:
    """A valid ``promise.create`` of exactly ``size`` bytes (padding in its param)."""
    frame = b'{"kind":"promise.create","head":' + dumps(HEAD) + b',"data":{"id":"big",'
    frame += b'"timeoutAt":' + str(FAR).encode() + b',"param":{"headers":{"pad":"'
    tail = b'"}}}}'
    pad = size - len(frame) - len(tail)
    assert pad >= 0, size
    return frame + b"x" * pad + tail


# -- the judging --------------------------------------------------------------------------------


def seed(machine: HttpMachine) -> None:
    """Pause the timeouts loop and start every example from the same state.

    A fuzzed ``debug.stop`` may have resumed the loop; a running loop could commit between
    the two snapshots compared below, so it is paused again first.
    """
    machine.fresh()
    task = VALID["task.create"]
    task = mutate(task, ("action", "data", "timeoutAt"), FAR)
    assert machine.ok("task.create", task)["task"]["version"] == 1
    machine.ok("promise.create", {"id": AWAITED, "timeoutAt": FAR})
    machine.ok("schedule.create", VALID["schedule.create"])


def judge(machine: HttpMachine, body: bytes, stream: Iterator[bytes] | None = None) -> int:
    """Send ``body`` (as ``stream`` if given); check the answer, and that a refusal wrote
    nothing. Its status."""
    seed(machine)
    before = machine.ok("debug.snap")
    try:
        response = machine.post(body if stream is None else stream)
    except httpx.TransportError as e:
        pytest.fail(f"the server dropped the request: {e!r}\nbody: {body[:500]!r}")
    status = response.status_code
    if currently_in_test_context():  # a hypothesis example, rather than a named case
        event(f"status {status}")
    assert status < 500, (body[:500], response.text[:500])
    if status == 413:
        assert "too large" in response.text
    else:
        assert response.headers["content-type"] == "application/json", response.text
        answer = response.json()
        assert answer["head"]["status"] == status, answer
        if status == 400:
            assert isinstance(answer["data"], str) and answer["data"].strip(), answer
    if status in (400, 401, 403, 413):  # 401 and 403 with auth on (test_bad_input_auth)
        assert machine.ok("debug.snap") == before, body[:500]
    # Still serving: a valid request gets its ordinary answer.
    answer = machine.apply(envelope("promise.get", {"id": AWAITED}, {**HEAD, "corrId": "after"}))
    assert answer["head"]["status"] in (200, 404), answer
    return status


@FUZZ
@given(body=mutated_requests())
def test_mutated_requests_of_every_kind(machine: HttpMachine, body: bytes) -> None:
    judge(machine, body)


@FUZZ
@given(body=nasty_fields())
def test_nasty_ids_tags_addresses_and_numbers(machine: HttpMachine, body: bytes) -> None:
    judge(machine, body)


@FUZZ
@given(body=broken_heads())
def test_broken_heads_and_kinds(machine: HttpMachine, body: bytes) -> None:
    judge(machine, body)


@settings(FUZZ, max_examples=100)
@given(body=raw_bodies())
def test_bodies_that_are_no_envelope(machine: HttpMachine, body: bytes) -> None:
    assert judge(machine, body) == 400


@settings(FUZZ, max_examples=30)
@given(body=deep())
def test_deep_nesting(machine: HttpMachine, body: bytes) -> None:
    assert judge(machine, body) == 400


# Either side of the limit by a few bytes, or anywhere up to four times it.
SIZES = st.integers(MAX_BODY_BYTES - 50, MAX_BODY_BYTES + 50) | st.integers(200, 4 * MAX_BODY_BYTES)


@settings(FUZZ, max_examples=40)
@given(size=SIZES, chunked=st.booleans())
def test_bodies_over_the_limit_are_413_and_at_the_limit_are_served(
    machine: HttpMachine, size: int, chunked: bool
) -> None:
    """The limit holds for a declared length and for a chunked body that never declares one."""
    body = sized_body(size)
    if chunked:
        # An iterator makes httpx send ``Transfer-Encoding: chunked``, 16 KiB per chunk.
        pieces = [body[i : i + 16384] for i in range(0, len(body), 16384)]
        status = judge(machine, body, iter(pieces))
    else:
        status = judge(machine, body)
    assert status == (413 if len(body) > MAX_BODY_BYTES else 200), (len(body), status)


def test_every_kind_has_a_valid_request_the_seeded_state_accepts(machine: HttpMachine) -> None:
    """The mutations start from requests that work, or they would only test 404s.

    Four cannot work on a state where the others do: the seeded task already exists
    (task.create), is held at version 1 (task.acquire of version 0) and is not halted
    (task.continue); their mutations reach the conflict branches instead. The seeded state
    declares no queue, so queue.get answers 404.
    """
    statuses = {}
    for kind in sorted(Kind):
        seed(machine)
        statuses[kind] = machine.apply(envelope(kind, VALID[kind]))["head"]["status"]
    refused = {k: s for k, s in statuses.items() if s not in (200, 300)}
    assert refused == {
        "task.acquire": 409,
        "task.continue": 409,
        "task.create": 409,
        "queue.get": 404,
    }


# -- troth's task.fences: a refusal names the field, and refuses the whole batch ----------------

TASK = VALID["task.fences"]["id"]
CREATE = VALID["task.fences"]["actions"][0]
SETTLE = VALID["task.fences"]["actions"][1]


@pytest.mark.parametrize(
    ("data", "named"),
    [
        pytest.param(mutate(VALID["task.fences"], ("actions",), DELETE), "`actions`", id="missing"),
        pytest.param(
            {**VALID["task.fences"], "actions": []}, "actions must not be empty", id="empty"
        ),
        pytest.param(
            {**VALID["task.fences"], "actions": [SETTLE] * 101},
            "actions has 101 entries: the limit is 100",
            id="oversized",
        ),
        pytest.param(
            {**VALID["task.fences"], "actions": [CREATE, {**SETTLE, "kind": "promise.get"}]},
            "`$.actions[1].kind`",
            id="action-kind",
        ),
        pytest.param(
            mutate(VALID["task.fences"], ("actions", 1, "data", "state"), "done"),
            "`$.actions[1].data.state`",
            id="malformed-action",
        ),
        pytest.param(
            mutate(VALID["task.fences"], ("actions", 0), "promise.create"),
            "`$.actions[0]`",
            id="action-not-an-object",
        ),
        pytest.param(
            mutate(VALID["task.fences"], ("actions", 1, "data", "id"), TASK),
            "actions[1].data.id must not equal the task id",
            id="fences-its-own-task",
        ),
    ],
)
def test_a_bad_batch_of_fences_is_refused_whole_naming_the_field(
    machine: HttpMachine, data: dict[str, Any], named: str
) -> None:
    # The first fence is valid: the refusal of a later one must not let it through.
    assert judge(machine, dumps(envelope("task.fences", data))) == 400
    answer = machine.apply(envelope("task.fences", data))
    assert named in answer["data"], answer


def sized_fences(size: int) -> bytes:
    """A valid ``task.fences`` (a create and a settle) of exactly ``size`` bytes, padded in
    its settle's value."""
    create = dumps({**CREATE, "data": {"id": AWAITED + ".1", "timeoutAt": FAR}})
    frame = b'{"kind":"task.fences","head":' + dumps(HEAD) + b',"data":{"id":"' + TASK.encode()
    frame += b'","version":1,"actions":[' + create + b',{"kind":"promise.settle","head":{},'
    frame += b'"data":{"id":"' + AWAITED.encode() + b'.1","state":"resolved","value":'
    frame += b'{"headers":{"pad":"'
    tail = b'"}}}}]}}'
    pad = size - len(frame) - len(tail)
    assert pad >= 0, size
    return frame + b"x" * pad + tail


def test_a_batch_over_the_body_limit_is_413_and_applies_none_of_its_fences(
    machine: HttpMachine,
) -> None:
    assert judge(machine, sized_fences(MAX_BODY_BYTES + 1)) == 413
    assert judge(machine, sized_fences(MAX_BODY_BYTES)) == 200
