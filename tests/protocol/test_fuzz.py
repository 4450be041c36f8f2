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

from tests.support.fuzzing import FIELDS, json_values, mutated, objects
from tests.support.wire import HEAD
from troth.protocol import BadRequest, Kind, Request, decode_request, encode_request

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

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


@pytest.mark.slow  # hundreds of generated envelopes: seconds
@FUZZ
@given(json_values)
def test_arbitrary_json_decodes_or_is_refused(value: Any) -> None:
    check(dumps(value))


@pytest.mark.slow  # hundreds of generated envelopes: seconds
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


@pytest.mark.slow  # hundreds of generated envelopes: seconds
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
