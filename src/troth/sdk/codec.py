"""Turning Python values into a promise's ``{headers, data}`` and back.

The pipeline, in order: a ``Serializer`` turns a value into bytes (JSON by default), the
bytes are base64-encoded into ``data`` (the shared convention of every Resonate SDK, so a
TypeScript worker can read what troth writes), the header ``troth:codec`` records which
serializer wrote them so decoding never guesses, and an optional ``Encryptor`` rewrites the
whole ``Value`` (it may add headers such as a key id). Decoding runs the same steps back.

Typed values: the wire holds plain JSON, so rich types come back through the type hints of
the function that receives them (``convert``): dataclasses, msgspec structs and pydantic
models round-trip when the signature says so. Exceptions are encoded as
``{"__type": "error", "name", "message", "stack", "module"}``, the shape the TypeScript SDK
also reads and writes (an exception group as its ``aggregate_error``, which adds ``errors``),
and come back as the same exception type when it is loaded in this process, else as
``RemoteError``; either way with the remote traceback text attached. A value with no
``troth:codec`` header (what the official SDKs write) is read as JSON.
"""

from __future__ import annotations

import base64
import binascii
import functools
import inspect
import sys
import traceback
import typing
from collections.abc import Callable
from typing import Any, Protocol

import msgspec

from troth.protocol.records import PromiseRecord, PromiseState, Value
from troth.sdk.errors import CanceledError, RemoteError, TimedOutError

CODEC_HEADER = "troth:codec"


class Serializer(Protocol):
    name: str

    def dumps(self, value: Any) -> bytes: ...

    def loads(self, data: bytes) -> Any: ...


class Encryptor(Protocol):
    """Rewrites a whole encoded ``Value``; it may add headers (a key id, an algorithm)."""

    def encrypt(self, value: Value) -> Value: ...

    def decrypt(self, value: Value) -> Value: ...


def _enc_hook(obj: Any) -> Any:
    if isinstance(obj, BaseException):
        return error_to_json(obj)
    dump = getattr(obj, "model_dump", None)  # pydantic v2 models
    if callable(dump):
        return dump(mode="json")
    if isinstance(obj, set | frozenset):
        return list(obj)
    raise NotImplementedError(f"cannot encode a value of type {type(obj).__qualname__}")


class JsonSerializer:
    name = "json"

    def __init__(self) -> None:
        self._encoder = msgspec.json.Encoder(enc_hook=_enc_hook)

    def dumps(self, value: Any) -> bytes:
        return self._encoder.encode(value)

    def loads(self, data: bytes) -> Any:
        return msgspec.json.decode(data)


class Codec:
    """The value codec: a serializer for writing, every known serializer for reading."""

    def __init__(
        self,
        serializer: Serializer | None = None,
        encryptor: Encryptor | None = None,
        readers: list[Serializer] | None = None,
    ) -> None:
        self.serializer = serializer or JsonSerializer()
        self.encryptor = encryptor
        self._readers = {s.name: s for s in [JsonSerializer(), *(readers or []), self.serializer]}

    def encode(self, value: Any) -> Value:
        data = base64.b64encode(self.serializer.dumps(value)).decode("ascii")
        encoded = Value(headers={CODEC_HEADER: self.serializer.name}, data=data)
        return self.encryptor.encrypt(encoded) if self.encryptor else encoded

    def decode(self, value: Value) -> Any:
        """The plain (JSON-shaped) value in ``value``; None when it carries no data."""
        if self.encryptor:
            value = self.encryptor.decrypt(value)
        if not value.data:
            return None
        name = (value.headers or {}).get(CODEC_HEADER, "json")
        reader = self._readers.get(name)
        if reader is None:
            raise ValueError(f"no serializer named {name!r} is known to this codec")
        try:
            raw = base64.b64decode(value.data, validate=True)
        except binascii.Error as e:
            raise ValueError(f"promise data is not base64: {e}") from None
        return reader.loads(raw)


# -- typed values ---------------------------------------------------------------------------


def _dec_hook(hint: Any, obj: Any) -> Any:
    validate = getattr(hint, "model_validate", None)  # pydantic v2 models
    if callable(validate):
        return validate(obj)
    raise NotImplementedError(f"cannot decode into {hint!r}")


def convert(obj: Any, hint: Any) -> Any:
    """``obj`` (plain JSON) as an instance of ``hint``; unchanged when there is no hint."""
    if hint is None or hint is Any or hint is inspect.Parameter.empty or obj is None:
        return obj
    if isinstance(hint, str):
        return obj  # an annotation we could not resolve
    if isinstance(hint, type) and issubclass(hint, BaseException):
        return error_from_json(obj) if is_error_json(obj) else obj
    return msgspec.convert(obj, hint, strict=False, dec_hook=_dec_hook)


def parameter_hints(fn: Callable[..., Any]) -> tuple[list[tuple[str, Any, Any]], Any]:
    """Each parameter as (name, kind, type hint), and the return hint, for ``convert``.

    Remembered per function: ``ctx.run`` asks on every call, and resolving a signature's
    type hints costs more than a cheap step (the result must not be mutated)."""
    try:
        return _remembered_hints(fn)
    except TypeError:  # an unhashable callable (a bound method of an unhashable object)
        return _hints(fn)


def _hints(fn: Callable[..., Any]) -> tuple[list[tuple[str, Any, Any]], Any]:
    try:
        hints = typing.get_type_hints(fn)
    except Exception:
        hints = {}
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # some builtins have none
        return [], None
    params = [(p.name, p.kind, hints.get(p.name)) for p in signature.parameters.values()]
    return params, hints.get("return")


_remembered_hints = functools.lru_cache(maxsize=1024)(_hints)


# -- errors ---------------------------------------------------------------------------------


def error_to_json(error: BaseException) -> dict[str, Any]:
    kind = type(error)
    stack = "".join(traceback.format_exception(error))
    if isinstance(error, BaseExceptionGroup):
        # The TypeScript SDK's AggregateError shape: a TS caller gets an AggregateError.
        return {
            "__type": AGGREGATE_ERROR,
            "name": kind.__qualname__,
            "module": kind.__module__,
            "message": error.message,
            "stack": stack,
            "errors": [error_to_json(e) for e in error.exceptions],
        }
    return {
        "__type": "error",
        "name": kind.__qualname__,
        "module": kind.__module__,
        "message": str(error),
        "stack": stack,
    }


AGGREGATE_ERROR = "aggregate_error"


def is_error_json(obj: Any) -> bool:
    """An encoded error: ``error``, or ``aggregate_error`` (with its ``errors`` list)."""
    return isinstance(obj, dict) and obj.get("__type") in ("error", AGGREGATE_ERROR)


def _loaded_exception_type(module: Any, name: Any) -> type[Exception] | None:
    """The exception class ``module.name`` if that module is already imported.

    Nothing is imported on behalf of data read from the server.
    """
    if not isinstance(module, str) or not isinstance(name, str):
        return None
    found: Any = sys.modules.get(module)
    for part in name.split("."):
        found = getattr(found, part, None)
    if isinstance(found, type) and issubclass(found, Exception):
        return found
    return None


def error_from_json(obj: dict[str, Any]) -> Exception:
    name = str(obj.get("name") or "Error")
    message = str(obj.get("message") or "")
    stack = obj.get("stack") if isinstance(obj.get("stack"), str) else None
    error: Exception | None = None
    kind = _loaded_exception_type(obj.get("module"), obj.get("name"))
    raw = obj.get("errors")
    errors = [error_from_json(e) if is_error_json(e) else e for e in raw or ()]
    group = obj.get("__type") == AGGREGATE_ERROR and isinstance(raw, list)
    if kind is not None:
        try:
            error = kind(message, errors) if issubclass(kind, BaseExceptionGroup) else kind(message)
        except Exception:
            error = None
    if error is None:
        error = RemoteError(name, message, stack, errors if group else None)
    error.remote_traceback = stack  # type: ignore[attr-defined]
    if stack:
        error.add_note(f"raised remotely:\n{stack.rstrip()}")
    return error


def result_of(record: PromiseRecord, codec: Codec, hint: Any = None) -> Any:
    """A settled promise as its value, or its failure raised as an exception."""
    state = record.state
    if state == PromiseState.RESOLVED:
        return convert(codec.decode(record.value), hint)
    if state == PromiseState.REJECTED_TIMEDOUT:
        raise TimedOutError(record.id)
    if state == PromiseState.REJECTED_CANCELED:
        raise CanceledError(record.id)
    if state == PromiseState.REJECTED:
        obj = codec.decode(record.value)
        if is_error_json(obj):
            raise error_from_json(obj)
        raise RemoteError("rejected", repr(obj))
    raise ValueError(f"promise {record.id!r} is still pending")
