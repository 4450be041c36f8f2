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
import collections.abc
import dataclasses
import functools
import inspect
import sys
import traceback
import types
import typing
from collections.abc import Callable
from typing import Any, Protocol

import msgspec

from troth.protocol.records import PromiseRecord, PromiseState, Value
from troth.sdk.errors import CanceledError, RemoteError, TimedOutError, UnstorableValueError

CODEC_HEADER = "troth:codec"

DEFAULT_MAX_VALUE_BYTES = 1024 * 1024
"""The largest encoded value (the base64 ``data``) the SDK records, in both modes. The
server's default request limit is 2 MiB, so a value at this limit always fits in a request;
a server configured lower answers 413, which the SDK reports the same way."""


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
        *,
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
    ) -> None:
        self.serializer = serializer or JsonSerializer()
        self.encryptor = encryptor
        self.max_value_bytes = max_value_bytes
        self._readers = {s.name: s for s in [JsonSerializer(), *(readers or []), self.serializer]}

    def encode(self, value: Any) -> Value:
        """``value`` as a promise value; ``UnstorableValueError`` when it cannot be recorded
        (no encoding for its type, or over ``max_value_bytes`` once encoded)."""
        try:
            raw = self.serializer.dumps(value)
        except Exception as e:
            raise UnstorableValueError(
                f"cannot record a value of type {type(value).__qualname__}: {e}"
            ) from e
        encoded = self._wrap(raw)
        size = len(encoded.data or "")
        if size > self.max_value_bytes:
            raise UnstorableValueError(
                f"a value of type {type(value).__qualname__} encodes to {size} bytes, over "
                f"the payload limit of {self.max_value_bytes} bytes (Troth(max_value_bytes=...))"
            )
        return encoded

    def encode_unlimited(self, value: Any) -> Value:
        """``value`` encoded without the payload limit, for the SDK's own small records."""
        return self._wrap(self.serializer.dumps(value))

    def _wrap(self, raw: bytes) -> Value:
        data = base64.b64encode(raw).decode("ascii")
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


class _NoDecoder(Exception):
    """msgspec met a type it cannot build (a plain class): decode the value another way.

    Not a ``TypeError``/``ValueError``, which msgspec would report as a validation error."""


def _dec_hook(hint: Any, obj: Any) -> Any:
    validate = getattr(hint, "model_validate", None)  # pydantic v2 models
    if callable(validate):
        return validate(obj)
    raise _NoDecoder(hint)


def convert(obj: Any, hint: Any) -> Any:
    """``obj`` (plain JSON) as an instance of ``hint``; unchanged when there is no hint.

    msgspec builds what it supports (scalars, ``Literal``, ``Optional`` and simple unions,
    generics, TypedDicts, dataclasses, structs; pydantic models through their validator).
    Where it refuses the hint as such (a union of several dataclasses, a plain class it
    cannot construct), the value is taken apart along the hint instead: each member of a
    union is tried in order, containers convert their items, and what nothing can build
    (a plain class, an unresolved string annotation, a ``TypeVar``, ``object``) is passed
    through as the plain JSON value. A value that does not fit a hint that can be checked
    (a string where ``int`` is declared) raises ``msgspec.ValidationError`` naming the hint.
    """
    if obj is None or _unchecked(hint):
        return obj
    if isinstance(hint, type) and issubclass(hint, BaseException):
        return error_from_json(obj) if is_error_json(obj) else obj
    try:
        return msgspec.convert(obj, hint, strict=False, dec_hook=_dec_hook)
    except msgspec.ValidationError as e:
        raise msgspec.ValidationError(
            f"{_brief(obj)} does not fit the type hint {_hint_name(hint)}: {e}"
        ) from None
    except (TypeError, _NoDecoder):
        return _convert_along(obj, hint)


def _unchecked(hint: Any) -> bool:
    """A hint that says nothing checkable about a value: it passes through unchanged."""
    return (
        hint is None
        or hint is Any
        or hint is object
        or hint is inspect.Parameter.empty
        or isinstance(hint, str | typing.ForwardRef | typing.TypeVar)
    )


_SEQUENCES: dict[Any, Callable[[list[Any]], Any]] = {
    list: list,
    set: set,
    frozenset: frozenset,
    collections.abc.Sequence: list,
    collections.abc.MutableSequence: list,
    collections.abc.Collection: list,
    collections.abc.Iterable: list,
    collections.abc.Set: frozenset,
    collections.abc.MutableSet: set,
}
_MAPPINGS = (dict, collections.abc.Mapping, collections.abc.MutableMapping)


def _convert_along(obj: Any, hint: Any) -> Any:
    """``convert`` for a hint msgspec refuses: by its parts, passing unknown ones through."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Annotated:
        return convert(obj, args[0])
    if origin is typing.Union or origin is types.UnionType:
        failures = []
        for member in args:
            if member is not type(None):
                try:
                    return convert(obj, member)
                except (msgspec.ValidationError, ValueError, TypeError) as e:
                    failures.append(str(e))
        raise msgspec.ValidationError(
            f"{_brief(obj)} fits no member of the type hint {_hint_name(hint)}: "
            + "; ".join(failures)
        )
    if isinstance(obj, list) and origin in _SEQUENCES and len(args) == 1:
        return _SEQUENCES[origin]([convert(item, args[0]) for item in obj])
    if isinstance(obj, list) and origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(convert(item, args[0]) for item in obj)
        if len(args) == len(obj):
            return tuple(convert(item, arg) for item, arg in zip(obj, args, strict=True))
    if isinstance(obj, dict) and origin in _MAPPINGS and len(args) == 2:
        return {convert(k, args[0]): convert(v, args[1]) for k, v in obj.items()}
    if isinstance(obj, dict) and isinstance(hint, type):
        if dataclasses.is_dataclass(hint):  # a field msgspec refuses: build it field by field
            fields = _field_hints(hint)
            known = {f.name for f in dataclasses.fields(hint) if f.init}
            return hint(**{k: convert(v, fields.get(k)) for k, v in obj.items() if k in known})
        if typing.is_typeddict(hint):
            fields = _field_hints(hint)
            return {k: convert(v, fields.get(k)) for k, v in obj.items()}
    return obj  # nothing here can build it: the plain JSON value


def _field_hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except Exception:
        return {}


def _brief(obj: Any) -> str:
    text = repr(obj)
    return text if len(text) <= 80 else text[:77] + "..."


def _hint_name(hint: Any) -> str:
    return hint.__qualname__ if isinstance(hint, type) else repr(hint)


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
    except Exception:  # one annotation that cannot be resolved: resolve the others alone
        hints = _each_hint(fn)
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # some builtins have none
        return [], None
    params = [(p.name, p.kind, hints.get(p.name)) for p in signature.parameters.values()]
    return params, hints.get("return")


def _each_hint(fn: Callable[..., Any]) -> dict[str, Any]:
    """Each annotation of ``fn`` resolved on its own; one that cannot be stays a string
    (which ``convert`` passes through)."""
    try:
        annotations = inspect.get_annotations(fn)
    except Exception:
        return {}
    namespace = getattr(inspect.unwrap(fn), "__globals__", {})
    return {name: _resolved(a, namespace) for name, a in annotations.items()}


def _resolved(annotation: Any, namespace: dict[str, Any]) -> Any:
    if isinstance(annotation, str):
        try:
            return eval(annotation, namespace)  # what get_type_hints does, one at a time
        except Exception:
            pass
    return annotation


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


def encode_error(codec: Codec, error: BaseException) -> Value:
    """An error as a value. One the codec cannot record (an unencodable part, or over the
    payload limit with its stack) is recorded by its type and the start of its message,
    without a stack, past the limit if need be: an error must always be recordable, or the
    execution that failed could never be settled."""
    try:
        return codec.encode(error)
    except UnstorableValueError as refused:
        text = f"{type(error).__qualname__}: {error}"[:1000]
        short = UnstorableValueError(f"{text} (recorded in short: {refused})"[:2000])
        return codec.encode_unlimited({**error_to_json(short), "stack": ""})


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
        raise TimedOutError(record.id, record.timeout_at, record.tags.get("troth:deadline"))
    if state == PromiseState.REJECTED_CANCELED:
        raise CanceledError(record.id)
    if state == PromiseState.REJECTED:
        obj = codec.decode(record.value)
        if is_error_json(obj):
            raise error_from_json(obj)
        raise RemoteError("rejected", repr(obj))
    raise ValueError(f"promise {record.id!r} is still pending")
