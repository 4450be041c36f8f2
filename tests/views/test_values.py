"""A value is shown as the JSON it holds when any SDK wrote JSON, raw with a reason
otherwise, and showing it never fails."""

from __future__ import annotations

import base64

import pytest

from troth.protocol.records import Value
from troth.sdk.codec import Codec
from troth.sdk.encryption import AesGcmEncryptor
from troth.views.values import error_text, json_value, shown


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def test_troth_codec_values_are_decoded() -> None:
    value = Codec().encode({"order": 7, "items": ["a", "b"]})
    assert shown(value).decoded
    assert shown(value).data == {"order": 7, "items": ["a", "b"]}


def test_official_sdk_values_without_a_header_are_json() -> None:
    seen = shown(Value(headers={}, data=b64(b'{"func":"greet","args":["x"]}')))
    assert (seen.decoded, seen.data) == (True, {"func": "greet", "args": ["x"]})


def test_json_value_round_trips_through_the_sdk_codec() -> None:
    assert Codec().decode(json_value({"reason": "stop"})) == {"reason": "stop"}
    assert shown(json_value([1, None])).data == [1, None]


@pytest.mark.parametrize(
    ("value", "note"),
    [
        (Value(headers={"troth:codec": "pickle"}, data=b64(b"\x80\x04")), "'pickle' serializer"),
        (Value(data="%%%not base64"), "not base64"),
        (Value(data=b64(b"{unquoted")), "not JSON"),
        (Value(data=""), "empty"),
    ],
)
def test_what_cannot_be_decoded_is_shown_raw_with_the_reason(value: Value, note: str) -> None:
    seen = shown(value)
    assert not seen.decoded
    assert seen.data == value.data
    assert seen.note is not None and note in seen.note


def test_encrypted_values_are_shown_raw() -> None:
    codec = Codec(encryptor=AesGcmEncryptor({"k1": bytes(32)}, active="k1"))
    seen = shown(codec.encode({"secret": 1}))
    assert not seen.decoded
    assert seen.note is not None and "troth:encryption" in seen.note


def test_no_value_is_empty() -> None:
    assert shown(Value()).empty


def test_error_text_reads_the_error_shape_both_sdks_write() -> None:
    recorded = shown(Codec().encode(ValueError("card declined")))
    assert error_text(recorded.data) == "ValueError: card declined"
    assert error_text({"__type": "error", "name": "TypeError", "message": ""}) == "TypeError"
    assert error_text({"plain": 1}) is None
