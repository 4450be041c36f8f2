"""Property tests: whatever arrives, decoding answers a ``Request`` or a ``BadRequest``.

"Bad input gets a clear error and changes nothing: a 400 with a message that names the field,
never a 500" (design.md). A decoder exception of any other type would become a 500, so these
properties feed the decoder bytes, JSON of every shape, envelopes of every kind with arbitrary
data, and valid requests with one part changed. Whatever decodes must survive troth's own
encoder: ``encode_request`` then ``decode_request`` gives the same request back.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from troth.protocol import BadRequest, Kind, Request, decode_request, encode_request

from ._wire import DELETE, HEAD, VALID, mutate

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Names the decoder knows, so that generated objects hit real fields often.
FIELDS = [
    "id", "timeoutAt", "param", "value", "tags", "state", "awaited", "awaiter", "address",
    "limit", "cursor", "pid", "ttl", "action", "actions", "kind", "head", "data", "version",
    "tasks", "cron", "promiseId", "promiseTimeout", "promiseParam", "promiseTags", "time",
    "headers", "corrId", "auth", "resonate:debug_time", "resonate:target", "resonate:origin",
    "resonate:branch", "resonate:parent", "resonate:delay", "resonate:timer",
]  # fmt: skip
WORDS = [
    "", "p", "p:1", "p:1.2", "p.1", "p\x00", "resolved", "pending", "rejected_timedout", "acquired",
    "promise.create", "promise.settle", "promise.get", "poll://any@g", "poll://uni@g/w",
    "http://h", "ftp://h", "* * * * *", "@daily", "0 0 30 2 *", "2026-04-01", "10", "-1",
]  # fmt: skip
NUMBERS = [0, 1, -1, 1000, 1001, 2**63 - 1, 2**63, -(2**63), 2**64, 1.0, 0.5, 1e300]

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.sampled_from(NUMBERS)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(WORDS)
)
keys = st.sampled_from(FIELDS) | st.text(max_size=8)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=6),
    max_leaves=24,
)
objects = st.dictionaries(keys, json_values, max_size=8)


def check(raw: bytes) -> Request | None:
    """Decode; the only acceptable failure is a well-formed 400."""
    try:
        request = decode_request(raw)
    except BadRequest as error:
        assert error.status == 400
        assert isinstance(error.message, str) and error.message.strip()
        assert isinstance(error.kind, str) and isinstance(error.corr_id, str)
        event("refused")
        return None
    event("decoded")
    assert isinstance(request, Request)
    assert isinstance(request.kind, Kind)
    assert isinstance(request.data, request.kind.data)
    again = decode_request(
        encode_request(
            request.kind, request.data, request.corr_id, request.auth, request.debug_time
        )
    )
    assert again == request
    return request


def dumps(value: Any) -> bytes:
    return json.dumps(value).encode()


@FUZZ
@given(st.binary(max_size=200))
def test_arbitrary_bytes_decode_or_are_refused(raw: bytes) -> None:
    check(raw)


@FUZZ
@given(st.text(max_size=200))
def test_arbitrary_text_decodes_or_is_refused(text: str) -> None:
    check(text.encode("utf-8", "surrogatepass"))


@FUZZ
@given(json_values)
def test_arbitrary_json_decodes_or_is_refused(value: Any) -> None:
    check(dumps(value))


@FUZZ
@given(
    kind=st.sampled_from(sorted(Kind)) | st.text(max_size=10),
    head=st.fixed_dictionaries({}, optional={k: json_values for k in HEAD})
    | st.just(HEAD)
    | json_values,
    data=json_values,
)
def test_envelopes_with_arbitrary_parts_decode_or_are_refused(
    kind: Any, head: Any, data: Any
) -> None:
    check(dumps({"kind": kind, "head": head, "data": data}))


@pytest.mark.slow  # seconds: 300 examples of every kind
@FUZZ
@given(kind=st.sampled_from(sorted(Kind)), data=objects)
def test_every_kind_with_arbitrary_data_decodes_or_is_refused(kind: str, data: Any) -> None:
    check(dumps({"kind": kind, "head": HEAD, "data": data}))


def paths(value: Any, prefix: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    """Every path into a JSON value, the value itself excluded."""
    if isinstance(value, dict):
        items: list[tuple[str | int, Any]] = list(value.items())
    elif isinstance(value, list):
        items = list(enumerate(value))
    else:
        return []
    out: list[tuple[str | int, ...]] = []
    for key, child in items:
        out.append((*prefix, key))
        out.extend(paths(child, (*prefix, key)))
    return out


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, Any]:
    """A valid request of some kind with one part replaced, removed or added."""
    kind = draw(st.sampled_from(sorted(Kind)))
    data = VALID[kind]
    for _ in range(draw(st.integers(1, 3))):
        targets = paths(data)
        how = draw(st.sampled_from(["replace", "delete", "add"]))
        if how == "add" or not targets:
            containers = [p for p in targets if isinstance(_at(data, p), dict)]
            where = draw(st.sampled_from([(), *containers]))
            data = mutate(data, (*where, draw(keys)), draw(json_values))
        else:
            path = draw(st.sampled_from(targets))
            value = DELETE if how == "delete" and isinstance(path[-1], str) else draw(json_values)
            data = mutate(data, path, value)
    return kind, data


def _at(value: Any, path: tuple[str | int, ...]) -> Any:
    for step in path:
        value = value[step]
    return value


@pytest.mark.slow  # seconds: 600 examples
@settings(FUZZ, max_examples=600)
@given(mutated())
def test_mutated_valid_requests_decode_or_are_refused(case: tuple[str, Any]) -> None:
    kind, data = case
    check(dumps({"kind": kind, "head": HEAD, "data": data}))


ids = st.text(min_size=1, max_size=10)
tag_maps = st.dictionaries(st.sampled_from(FIELDS[-6:]) | st.text(max_size=6), st.text(max_size=8))
values = st.fixed_dictionaries(
    {}, optional={"headers": st.dictionaries(st.text(max_size=4), st.text(max_size=4)),
                  "data": st.text(max_size=8)},
)  # fmt: skip


@FUZZ
@given(
    id=ids,
    timeout_at=st.integers(0, 2**63 - 1),
    param=values,
    tags=tag_maps,
    debug_time=st.none() | st.integers(-(2**63), 2**63 - 1),
)
def test_well_typed_creations_decode_and_round_trip(
    id: str, timeout_at: int, param: Any, tags: Any, debug_time: int | None
) -> None:
    # Typed data of arbitrary Unicode: the rules may still refuse it, but whatever passes
    # must come back from troth's encoder unchanged.
    data = {"id": id, "timeoutAt": timeout_at, "param": param, "tags": tags}
    head = {**HEAD, "resonate:debug_time": debug_time}
    request = check(dumps({"kind": "promise.create", "head": head, "data": data}))
    if request is not None:
        assert (request.data.id, request.data.timeout_at, request.data.tags) == (
            id,
            timeout_at,
            tags,
        )
        assert request.debug_time == debug_time


@settings(FUZZ, max_examples=50)
@given(depth=st.integers(1, 20_000), opener=st.sampled_from([b"[", b'{"a":']))
def test_deeply_nested_json_never_escapes_as_a_crash(depth: int, opener: bytes) -> None:
    closer = b"]" if opener == b"[" else b"}"
    nested = opener * depth + b"1" + closer * depth
    check(nested)
    check(
        b'{"kind":"promise.get","head":{"corrId":"c","version":"2026-04-01"},"data":{"id":"p",'
        b'"x":' + nested + b"}}"
    )
