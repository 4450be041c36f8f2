"""Turning Python values into a promise's ``{headers, data}`` and back.

The pipeline, in order: a ``Serializer`` turns a value into bytes (JSON by default), the
bytes are base64-encoded into ``data`` (the shared convention of every Resonate SDK, so a
TypeScript worker can read what troth writes), the header ``troth:codec`` records which
serializer wrote them so decoding never guesses, and an optional ``Encryptor`` rewrites the
whole ``Value`` (it may add headers such as a key id). Decoding runs the same steps back.

Typed values: the wire holds plain JSON, so rich types come back through the type hints of
the function that receives them (``convert``): dataclasses, msgspec structs and pydantic
models round-trip when the signature says so. Exceptions are encoded as
``{"__type": "error", "name", "message", "stack"}``, the shape the TypeScript SDK also reads
and writes (an exception group as its ``aggregate_error``, which adds ``errors``), plus
fields only troth reads (``module``, ``args``, ``attrs``, ``cause``: see ``error_to_json``),
and come back as the same exception class with the same attributes when its module is
loaded in this process, else as ``RemoteError``; either way with the remote traceback text
attached. A value with no ``troth:codec`` header (what the official SDKs write) is read as
JSON.
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
from typing import Any, Protocol, TypeGuard

import msgspec

from troth.protocol.conventions import CODEC_HEADER
from troth.protocol.records import PromiseRecord, PromiseState, Value
from troth.sdk.errors import CanceledError, RemoteError, TimedOutError, UnstorableValueError

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
    """``error`` as a JSON-shaped record that ``error_from_json`` rebuilds.

    The fields both SDKs read: ``__type`` (``error``, or ``aggregate_error`` for an exception
    group, whose ``errors`` the TypeScript SDK reads as an ``AggregateError``'s), ``name``,
    ``message``, ``stack``. troth adds fields the TypeScript SDK ignores: ``module`` (with
    ``name``, where the class is found), ``args`` (left out when they are just the message),
    ``attrs`` (the instance's attributes, and the C-level fields of built-in exceptions such
    as ``OSError.filename``), ``arg_attrs`` (an attribute that *is* one of the args, by its
    index, so a large value is not written twice) and ``cause`` (``__cause__``, recursively,
    without a stack: the top-level ``stack`` already shows the whole chain).

    An arg the codec cannot encode (or over ``_ERROR_PART_BYTES``) is written as its shortened
    repr, so positions hold; such an attribute is left out: a part that cannot be written
    never makes the whole error unwritable. Nesting (causes, members, errors held in args) is cut at
    ``_ERROR_DEPTH``, which also ends a cycle.
    """
    return _error_record(error, 0, with_stack=True)


def _error_record(error: BaseException, depth: int, *, with_stack: bool) -> dict[str, Any]:
    if isinstance(error, RemoteError) and error.record is not None:
        # Re-raised unchanged: pass on the error it stands for, so a process that has its
        # class (or a TypeScript caller) sees the original; this traceback includes the note
        # that carries the original one.
        return {**error.record, "stack": _stack(error) if with_stack else ""}
    kind = type(error)
    record: dict[str, Any] = {
        "__type": "error",
        "name": kind.__qualname__,
        "module": kind.__module__,
        "message": _message(error),
        "stack": _stack(error) if with_stack else "",
    }
    deeper = depth + 1
    if isinstance(error, BaseExceptionGroup):
        record["__type"] = AGGREGATE_ERROR
        record["message"] = error.message  # as a TypeScript AggregateError's message
        if deeper < _ERROR_DEPTH:
            record["errors"] = [_error_record(e, deeper, with_stack=True) for e in error.exceptions]
        else:
            record["errors"] = []
    if deeper >= _ERROR_DEPTH:
        return record

    def hook(obj: Any) -> Any:
        if isinstance(obj, BaseException):
            return _error_record(obj, deeper, with_stack=True)
        return _enc_hook(obj)

    written: list[bool] = []  # which args the record carries as they are
    first = error.args[0] if len(error.args) == 1 else None
    if isinstance(first, str) and first == record["message"]:
        written = [True]  # the args are just the message: the record's ``message``
    elif not isinstance(error, BaseExceptionGroup):  # a group's args are message and members
        args: list[Any] = []
        for arg in error.args:
            ok, value = _json_part(arg, hook)
            args.append(value if ok else _short_repr(arg))
            written.append(ok)
        record["args"] = args
    attrs: dict[str, Any] = {}
    arg_attrs: dict[str, int] = {}
    for key, value in _attributes(error):
        index = next((i for i, ok in enumerate(written) if ok and error.args[i] is value), None)
        if index is not None:
            arg_attrs[key] = index
            continue
        ok, encoded = _json_part(value, hook)
        if ok:
            attrs[key] = encoded
    if attrs:
        record["attrs"] = attrs
    if arg_attrs:
        record["arg_attrs"] = arg_attrs
    if error.__cause__ is not None:
        record["cause"] = _error_record(error.__cause__, deeper, with_stack=False)
    return record


AGGREGATE_ERROR = "aggregate_error"

_ERROR_DEPTH = 10
"""How deep errors nest in one record (causes, group members, errors held in args)."""

_ERROR_PART_BYTES = 64 * 1024
"""The largest arg or attribute an error record carries: an error holding a large value (a
response body, a batch) is still recorded, as its class and message, not refused as over the
payload limit and cut down to a short record that loses its class."""

_REMOTE_NOTE = "raised remotely:"


def _stack(error: BaseException) -> str:
    return "".join(traceback.format_exception(error))


def _message(error: BaseException) -> str:
    try:
        return str(error)
    except Exception:  # a broken __str__ must not make the error unrecordable
        return f"<{type(error).__qualname__}: str() failed>"


def _short_repr(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__qualname__}: repr() failed>"
    return text if len(text) <= 1000 else text[:1000] + "..."


def _json_part(value: Any, hook: Callable[[Any], Any]) -> tuple[bool, Any]:
    """``(True, value as plain JSON)``; ``(False, None)`` when the codec cannot encode it or
    it encodes to more than ``_ERROR_PART_BYTES``."""
    try:
        raw = msgspec.json.encode(value, enc_hook=hook)
    except Exception:  # NotImplementedError from the hook, msgspec's own, RecursionError
        return False, None
    if len(raw) > _ERROR_PART_BYTES:
        return False, None
    return True, msgspec.json.decode(raw)


def _attributes(error: BaseException) -> list[tuple[str, Any]]:
    """What an exception carries beyond its args: its instance attributes (but not its
    ``remote_traceback``, which is the stack, nor the notes troth added) and the set C-level
    fields of built-in exception classes (``errno``, ``filename``, ``name``, ...)."""
    found: list[tuple[str, Any]] = []
    for key, value in vars(error).items():
        if key == "__notes__" and isinstance(value, list):
            value = [n for n in value if not (isinstance(n, str) and n.startswith(_REMOTE_NOTE))]
            if value:
                found.append((key, value))
        elif isinstance(key, str) and not key.startswith("__") and key != "remote_traceback":
            found.append((key, value))
    # mypy checks a class object against Hashable by its instances' unbound ``__hash__`` and
    # refuses it; every class is hashable.
    for key in _builtin_fields(type(error)):  # type: ignore[arg-type]
        value = getattr(error, key, None)
        if value is not None:
            found.append((key, value))
    return found


@functools.cache
def _builtin_fields(kind: type) -> frozenset[str]:
    """The C-level fields that built-in exception classes in ``kind``'s MRO define (a group's
    ``message`` and ``exceptions`` are its own fields of the record)."""
    return frozenset(
        name
        for base in kind.__mro__
        if base.__module__ == "builtins" and not issubclass(base, BaseExceptionGroup)
        for name, member in vars(base).items()
        if isinstance(member, types.MemberDescriptorType) and not name.startswith("__")
    )


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


def is_error_json(obj: Any) -> TypeGuard[dict[str, Any]]:
    """An encoded error: ``error``, or ``aggregate_error`` (with its ``errors`` list)."""
    return isinstance(obj, dict) and obj.get("__type") in ("error", AGGREGATE_ERROR)


def _loaded_exception_type(module: Any, name: Any) -> type[Exception] | None:
    """The exception class ``module.name`` if that module is already imported.

    Nothing is imported on behalf of data read from the server: importing a module runs its
    code, and the module name comes from a promise anyone with access to the server can
    write, so honouring it would let that data choose code to run in every worker that reads
    it. The modules that matter are loaded anyway: a registered function's module (the
    function object exists), whatever it imports, and the module of any class the awaiting
    code names in an ``except`` clause. The case left out — a class whose module no code in
    this process has imported yet, such as a library a step imports lazily and a resumed
    worker did not run again — arrives as ``RemoteError``, whose ``type_name`` says what it
    was; a process that needs the class imports its module at start.

    Only ``Exception`` subclasses (and ``BaseExceptionGroup``, which is rebuilt as an
    ``ExceptionGroup`` of rebuilt members) are returned: control signals such as
    ``Suspended`` or ``KeyboardInterrupt`` must never be raised because data said so.
    """
    if not isinstance(module, str) or not isinstance(name, str):
        return None
    found: Any = sys.modules.get(module)
    for part in name.split("."):
        found = getattr(found, part, None)
    if isinstance(found, type) and (issubclass(found, Exception) or found is BaseExceptionGroup):
        return found  # type: ignore[return-value]
    return None


def error_from_json(obj: dict[str, Any]) -> Exception:
    """The exception ``obj`` (an ``error_to_json`` record, or the TypeScript SDK's) records.

    When its class is loaded here (``_loaded_exception_type``) it is rebuilt the way pickle
    rebuilds an object without calling its constructor: ``cls.__new__(cls, *args)``, then the
    recorded attributes into its ``__dict__`` — so a custom ``__init__`` with another
    signature, or side effects, is never called with the wrong arguments. Only a built-in
    ``__init__`` (which just parses args into the exception's C-level fields) is called.
    Then ``__cause__``, recursively. Otherwise, or when that fails, it is a ``RemoteError``
    named ``module.qualname`` with the recorded attributes. Either way the remote traceback
    text is its ``remote_traceback`` and a note.
    """
    return _error_from_record(obj, 0)


def _error_from_record(obj: dict[str, Any], depth: int) -> Exception:
    name = str(obj.get("name") or "Error")
    module = obj.get("module")
    message = str(obj.get("message") or "")
    stack = obj.get("stack") if isinstance(obj.get("stack"), str) else None
    deeper = depth + 1

    def part(value: Any) -> Any:
        return _error_from_record(value, deeper) if is_error_json(value) else value

    follow = deeper < _ERROR_DEPTH
    raw: Any = obj.get("errors")  # unchecked JSON: checked as a list just below
    group = obj.get("__type") == AGGREGATE_ERROR and isinstance(raw, list)
    errors = [part(e) for e in raw] if group and follow else []
    raw_args = obj.get("args")
    args = tuple(part(a) for a in raw_args) if isinstance(raw_args, list) and follow else (message,)
    attributes: dict[str, Any] = {}
    if follow and isinstance(obj.get("attrs"), dict):
        attributes = {
            k: part(v) for k, v in obj["attrs"].items() if isinstance(k, str) and k[:2] != "__"
        }
        notes = obj["attrs"].get("__notes__")
        if isinstance(notes, list):
            attributes["__notes__"] = [str(n) for n in notes]
    if follow and isinstance(obj.get("arg_attrs"), dict):
        for key, index in obj["arg_attrs"].items():
            if isinstance(index, int) and 0 <= index < len(args):
                attributes[key] = args[index]
    kind = _loaded_exception_type(module, name)
    error = _rebuilt(kind, message, args, errors, attributes) if kind is not None else None
    if error is None:
        type_name = f"{module}.{name}" if isinstance(module, str) and module else name
        record = {k: v for k, v in obj.items() if k != "stack"}
        error = RemoteError(
            type_name, message, stack, errors if group else None,
            attributes=attributes, record=record,
        )  # fmt: skip
    cause = obj.get("cause")
    if follow and is_error_json(cause):
        error.__cause__ = _error_from_record(cause, deeper)
    error.remote_traceback = stack  # type: ignore[attr-defined]
    if stack:
        error.add_note(f"{_REMOTE_NOTE}\n{stack.rstrip()}")
    return error


def _rebuilt(
    kind: type[Exception],
    message: str,
    args: tuple[Any, ...],
    members: list[Any],
    attributes: dict[str, Any],
) -> Exception | None:
    """An instance of ``kind`` with ``args`` and ``attributes``, built without its
    ``__init__`` unless that is a built-in one; None when ``kind`` refuses them."""
    if issubclass(kind, BaseExceptionGroup):
        args = (message, members)
    try:
        error = kind.__new__(kind, *args)
        if isinstance(kind.__init__, types.WrapperDescriptorType):
            kind.__init__(error, *args)
        error.args = args
    except Exception:
        return None
    if not isinstance(error, Exception):
        return None
    fields = _builtin_fields(type(error))  # type: ignore[arg-type]  # as in _attributes
    for key, value in attributes.items():
        if key not in fields:
            error.__dict__[key] = value
            continue
        try:
            setattr(error, key, value)
        except (TypeError, ValueError, AttributeError):
            continue  # a field of another type than recorded: keep what __init__ made
    return error


def result_of(record: PromiseRecord, codec: Codec, hint: Any = None) -> Any:
    """A settled promise as its value, or its failure raised as an exception."""
    state = record.state
    if state == PromiseState.RESOLVED:
        return convert(codec.decode(record.value), hint)
    if state == PromiseState.REJECTED_TIMEDOUT:
        raise TimedOutError(record.id, record.timeout_at, record.tags.get("troth:deadline"))
    if state == PromiseState.REJECTED_CANCELED:
        raise canceled_error(record, codec)
    if state == PromiseState.REJECTED:
        obj = codec.decode(record.value)
        if is_error_json(obj):
            raise error_from_json(obj)
        raise RemoteError("rejected", repr(obj))
    raise ValueError(f"promise {record.id!r} is still pending")


def canceled_error(record: PromiseRecord, codec: Codec) -> Exception:
    """What a ``rejected_canceled`` promise raises: the ``CanceledError`` an execution ended
    with (its reason kept), else one naming the promise and the value it was canceled with
    (``app.promises.cancel(id, reason)``; another SDK's value is shown as it is)."""
    try:
        value = codec.decode(record.value)
    except Exception:
        value = None
    if is_error_json(value):
        error = error_from_json(value)
        if isinstance(error, CanceledError):
            return error
        return CanceledError(record.id, error)
    if value is None or value == {}:
        return CanceledError(record.id)
    return CanceledError(record.id, value if isinstance(value, str) else repr(value))
