"""The value codec: JSON with headers, typed round trips, errors, encryption."""

from __future__ import annotations

import base64
import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime

import msgspec
import pytest

from troth.protocol.records import PromiseRecord, PromiseState, Value
from troth.sdk.codec import (
    CODEC_HEADER,
    Codec,
    convert,
    error_from_json,
    error_to_json,
    result_of,
)
from troth.sdk.errors import CanceledError, RemoteError, TimedOutError


@dataclass
class Point:
    x: int
    y: int


class Money(msgspec.Struct):
    amount: int
    currency: str


def test_values_are_base64_json_with_a_header_naming_the_codec():
    value = Codec().encode({"func": "f", "args": [1, "a"]})
    assert value.headers == {CODEC_HEADER: "json"}
    assert json.loads(base64.b64decode(value.data)) == {"func": "f", "args": [1, "a"]}


def test_values_written_by_another_sdk_without_headers_decode_as_json():
    data = base64.b64encode(b'{"func":"g","args":[]}').decode()
    assert Codec().decode(Value(headers={}, data=data)) == {"func": "g", "args": []}
    assert Codec().decode(Value()) is None


@pytest.mark.parametrize(
    ("value", "hint"),
    [
        (Point(1, 2), Point),
        (Money(5, "EUR"), Money),
        ([Point(1, 2)], list[Point]),
        (datetime(2024, 1, 2, tzinfo=UTC), datetime),
        ({"a": 1}, dict[str, int]),
    ],
)
def test_typed_values_round_trip_through_their_hint(value, hint):
    codec = Codec()
    assert convert(codec.decode(codec.encode(value)), hint) == value


def test_pydantic_models_round_trip_when_pydantic_is_installed():
    pydantic = pytest.importorskip("pydantic")

    class User(pydantic.BaseModel):
        name: str

    codec = Codec()
    assert convert(codec.decode(codec.encode(User(name="ana"))), User) == User(name="ana")


class InsufficientFunds(Exception):
    pass


def test_exceptions_round_trip_as_their_type_with_the_remote_traceback():
    try:
        raise InsufficientFunds("balance 3 < 10")
    except InsufficientFunds as e:
        encoded = error_to_json(e)
    assert encoded["__type"] == "error" and encoded["name"] == "InsufficientFunds"
    rebuilt = error_from_json(json.loads(json.dumps(encoded)))
    assert type(rebuilt) is InsufficientFunds
    assert str(rebuilt) == "balance 3 < 10"
    assert "raise InsufficientFunds" in rebuilt.remote_traceback


def test_an_exception_type_not_loaded_here_comes_back_as_remote_error():
    rebuilt = error_from_json(
        {"__type": "error", "name": "Error", "message": "boom", "stack": "Error: boom\n  at f"}
    )
    assert isinstance(rebuilt, RemoteError)
    assert (rebuilt.type_name, rebuilt.message) == ("Error", "boom")


def _record(state: PromiseState, value: Value | None = None) -> PromiseRecord:
    return PromiseRecord("p", state, Value(), value or Value(), {}, 10, 0, 10)


def test_settled_records_become_values_or_raised_errors():
    codec = Codec()
    assert result_of(_record(PromiseState.RESOLVED, codec.encode([1, 2])), codec) == [1, 2]
    with pytest.raises(TimedOutError):
        result_of(_record(PromiseState.REJECTED_TIMEDOUT), codec)
    with pytest.raises(CanceledError):
        result_of(_record(PromiseState.REJECTED_CANCELED), codec)
    with pytest.raises(KeyError):
        result_of(_record(PromiseState.REJECTED, codec.encode(KeyError("k"))), codec)
    with pytest.raises(RemoteError, match="'no'"):
        result_of(_record(PromiseState.REJECTED, codec.encode("no")), codec)


def test_aes_gcm_encrypts_values_and_names_the_key():
    pytest.importorskip("cryptography")
    from troth.sdk.encryption import KEY_ID_HEADER, AesGcmEncryptor

    old, new = os.urandom(32), os.urandom(32)
    writer = Codec(encryptor=AesGcmEncryptor({"k1": old}, active="k1"))
    sealed = writer.encode({"secret": 42})
    assert sealed.headers[KEY_ID_HEADER] == "k1"
    assert b"secret" not in base64.b64decode(sealed.data)

    rotated = Codec(encryptor=AesGcmEncryptor({"k1": old, "k2": new}, active="k2"))
    assert rotated.decode(sealed) == {"secret": 42}  # old values stay readable
    assert rotated.encode(1).headers[KEY_ID_HEADER] == "k2"
    assert rotated.decode(Codec().encode("plain")) == "plain"  # unencrypted values too

    tampered = Value(sealed.headers, base64.b64encode(b"x" * 40).decode())
    with pytest.raises(Exception):  # noqa: B017 - the AEAD tag check fails
        rotated.decode(tampered)
    with pytest.raises(ValueError, match="not configured"):
        Codec(encryptor=AesGcmEncryptor({"k2": new}, active="k2")).decode(sealed)
