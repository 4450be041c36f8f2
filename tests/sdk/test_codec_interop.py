"""Values and errors as the official TypeScript SDK writes them, read by troth's codec.

The TS SDK (``@resonatehq/sdk`` 0.11) writes ``{headers: {}, data: base64(JSON)}`` with no
codec header, errors as ``{__type: "error", name, message, stack}`` and an
``AggregateError`` as ``{__type: "aggregate_error", ..., errors: [...]}``. The literals
below are what it produces (see tests/interop/test_cross_rpc.py for the live exchange).
"""

from __future__ import annotations

import base64
import json

import pytest

from troth.protocol.records import PromiseRecord, PromiseState, Value
from troth.sdk.codec import Codec, error_from_json, error_to_json, is_error_json, result_of
from troth.sdk.errors import RemoteError


def ts_value(obj: object) -> Value:
    return Value(headers={}, data=base64.b64encode(json.dumps(obj).encode()).decode())


def rejected(value: Value) -> PromiseRecord:
    return PromiseRecord("p", PromiseState.REJECTED, Value(), value, {}, 10, 0, 10)


def test_a_headerless_ts_invocation_param_decodes_as_json():
    param = ts_value({"func": "add", "args": [1, {"x": "é"}], "version": 1})
    assert Codec().decode(param) == {"func": "add", "args": [1, {"x": "é"}], "version": 1}


def test_an_empty_ts_value_is_none():
    # A TS function that returns `undefined` settles with data "".
    assert Codec().decode(Value(headers={}, data="")) is None


def test_a_ts_error_rejection_raises_remote_error_with_name_message_and_stack():
    value = ts_value(
        {"__type": "error", "name": "TypeError", "message": "bad", "stack": "TypeError: bad\n"}
    )
    with pytest.raises(RemoteError) as caught:
        result_of(rejected(value), Codec())
    e = caught.value
    assert (e.type_name, e.message, e.remote_traceback) == ("TypeError", "bad", "TypeError: bad\n")
    assert e.errors == []


def test_a_ts_aggregate_error_raises_remote_error_carrying_each_inner_error():
    value = ts_value(
        {
            "__type": "aggregate_error",
            "name": "AggregateError",
            "message": "several",
            "stack": "AggregateError: several\n",
            "errors": [
                {"__type": "error", "name": "Error", "message": "a", "stack": "Error: a"},
                {"__type": "error", "name": "RangeError", "message": "b", "stack": "RangeError"},
                "not an error",
            ],
        }
    )
    with pytest.raises(RemoteError) as caught:
        result_of(rejected(value), Codec())
    e = caught.value
    assert (e.type_name, e.message) == ("AggregateError", "several")
    assert [(x.type_name, x.message) for x in e.errors[:2]] == [("Error", "a"), ("RangeError", "b")]
    assert e.errors[2] == "not an error"


def test_an_exception_group_is_written_in_the_ts_aggregate_shape_and_read_back():
    try:
        raise ExceptionGroup("two failed", [ValueError("a"), TypeError("b")])
    except ExceptionGroup as group:
        encoded = error_to_json(group)
    assert encoded["__type"] == "aggregate_error" and is_error_json(encoded)
    assert encoded["message"] == "two failed"  # as a TS AggregateError's message
    assert [(e["__type"], e["name"], e["message"]) for e in encoded["errors"]] == [
        ("error", "ValueError", "a"),
        ("error", "TypeError", "b"),
    ]
    rebuilt = error_from_json(json.loads(json.dumps(encoded)))
    assert type(rebuilt) is ExceptionGroup
    assert [(type(e), str(e)) for e in rebuilt.exceptions] == [(ValueError, "a"), (TypeError, "b")]
