"""The request/response envelope: bytes in, a typed request or a 400; a reply out, bytes.

Decoding follows the reference server's order (docs/references.md#decoding-order): the
envelope's own shape, a non-empty ``kind``, ``data`` being an object, the protocol version,
the kind being known, then the kind's ``data`` schema and its extra checks. Every failure is a
``BadRequest`` whose message says what is wrong and where.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import msgspec

from troth.protocol.kinds import FENCE_ACTIONS, Kind, failed
from troth.protocol.records import Millis, NonEmpty, NonNegative
from troth.protocol.requests import Data, FenceAction, TaskFenceRequest, TaskFencesRequest
from troth.protocol.responses import (
    Reply,
    TaskFenceResponse,
    TaskFenceResult,
    TaskFencesResponse,
    TaskFencesResult,
)

VERSION = "2026-04-01"


class BadRequest(Exception):
    """A request the server refuses before touching any state."""

    def __init__(self, message: str, kind: str = "unknown", corr_id: str = "0", status: int = 400):
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.corr_id = corr_id
        self.status = status

    def reply(self) -> Reply:
        return Reply(self.status, self.message)


class Request(NamedTuple):
    kind: Kind
    corr_id: str
    data: Data
    auth: str | None = None
    debug_time: int | None = None


class RequestHead(msgspec.Struct, frozen=True, omit_defaults=True, rename="camel"):
    corr_id: str
    version: str
    auth: str | None = None
    debug_time: Millis | None = msgspec.field(default=None, name="resonate:debug_time")


class _Envelope(msgspec.Struct, frozen=True):
    kind: str
    head: RequestHead
    data: msgspec.Raw


class _RawFenceAction(msgspec.Struct, frozen=True):
    kind: str
    data: msgspec.Raw
    head: Any = None


class _RawFence(msgspec.Struct, frozen=True):
    id: NonEmpty
    version: NonNegative
    action: _RawFenceAction


class _RawFences(msgspec.Struct, frozen=True):
    id: NonEmpty
    version: NonNegative
    actions: list[_RawFenceAction]


class ResponseHead(msgspec.Struct, frozen=True, rename="camel"):
    corr_id: str
    status: int
    version: str = VERSION


class ResponseEnvelope(msgspec.Struct, frozen=True):
    kind: str
    head: ResponseHead
    data: Any


class _ReadHead(msgspec.Struct, frozen=True, rename="camel"):
    status: int
    # Absent, it answers no request; a fence's nested action needs none (the outer has it).
    corr_id: str = ""


class _ReadEnvelope(msgspec.Struct, frozen=True):
    """A response envelope as read back, its ``data`` still raw: its type is the kind's."""

    kind: str
    head: _ReadHead
    data: msgspec.Raw = msgspec.Raw(b"null")


_envelope_decoder = msgspec.json.Decoder(_Envelope)
_raw_fence_decoder = msgspec.json.Decoder(_RawFence)
_raw_fences_decoder = msgspec.json.Decoder(_RawFences)
# The fence kinds' data nests actions of two kinds, read by ``_NESTED`` instead.
_decoders: dict[Kind, msgspec.json.Decoder[Any]] = {
    kind: msgspec.json.Decoder(kind.data)
    for kind in Kind
    if kind not in (Kind.TASK_FENCE, Kind.TASK_FENCES)
}
# Keyed by wire name (a ``Kind`` is one), as the raw names read off the wire look them up.
_action_decoders: dict[str, msgspec.json.Decoder[Any]] = {
    kind: msgspec.json.Decoder(t) for kind, t in FENCE_ACTIONS.items()
}
_response_decoder = msgspec.json.Decoder(_ReadEnvelope)
_body_decoders: dict[tuple[str, int], msgspec.json.Decoder[Any]] = {
    (kind, status): msgspec.json.Decoder(body)
    for kind in Kind
    for status, body in kind.responses.items()
}
_any_decoder = msgspec.json.Decoder()
_encoder = msgspec.json.Encoder()

# msgspec recurses once per nesting level and raises RecursionError on very deep input, even
# inside skipped values; such a body is a client mistake like any other malformed JSON.
_TOO_DEEP = "JSON is nested too deeply"


def _salvage(body: bytes) -> tuple[str, str]:
    """The kind and corrId to answer a malformed envelope with, when they can be read."""
    try:
        raw = msgspec.json.decode(body)
    except (msgspec.DecodeError, RecursionError):
        return "unknown", "0"
    if not isinstance(raw, dict):
        return "unknown", "0"
    kind = raw.get("kind")
    head = raw.get("head")
    corr_id = head.get("corrId") if isinstance(head, dict) else None
    return (
        kind if isinstance(kind, str) else "unknown",
        corr_id if isinstance(corr_id, str) else "0",
    )


class Envelope(NamedTuple):
    """A request whose envelope passed its checks; ``data`` is still raw JSON."""

    kind: str
    corr_id: str
    data: bytes
    auth: str | None = None
    debug_time: int | None = None


def decode_request(body: bytes) -> Request:
    """Parse and validate one request envelope; raise ``BadRequest`` on any client mistake."""
    return decode_data(decode_envelope(body))


def decode_envelope(body: bytes) -> Envelope:
    """The envelope's own checks, in order: its shape, a non-empty ``kind``, ``data`` an
    object, the version. The server authenticates between this and ``decode_data``."""
    try:
        env = _envelope_decoder.decode(body)
    except (msgspec.DecodeError, RecursionError) as e:
        kind, corr_id = _salvage(body)
        reason = _TOO_DEEP if isinstance(e, RecursionError) else e
        raise BadRequest(f"Invalid request envelope: {reason}", kind, corr_id) from None
    kind, corr_id = env.kind, env.head.corr_id
    if not kind:
        raise BadRequest(
            "Missing or invalid 'kind' field: must be a non-empty string", kind, corr_id
        )
    if not bytes(env.data).startswith(b"{"):
        raise BadRequest("Invalid 'data' field: must be an object", kind, corr_id)
    if env.head.version != VERSION:
        raise BadRequest(
            f"Unsupported protocol version {env.head.version!r}, supported versions: [{VERSION!r}]",
            kind,
            corr_id,
        )
    return Envelope(kind, corr_id, env.data, env.head.auth, env.head.debug_time)


def decode_data(envelope: Envelope, admit: Callable[[Data], None] | None = None) -> Request:
    """The kind's ``data``, decoded and validated: an unknown kind, a schema error or a
    failed check is a ``BadRequest``. ``admit`` sees the data once it has its shape and
    before the checks, so an access check may refuse it whatever the checks would say."""
    corr_id = envelope.corr_id
    kind = Kind.named(envelope.kind)
    if kind is None:
        raise BadRequest(f"Unknown operation: {envelope.kind}", envelope.kind, corr_id)
    try:
        raw = envelope.data
        nested = _NESTED.get(kind)
        data = nested(raw) if nested is not None else _decoders[kind].decode(raw)
    except msgspec.DecodeError as e:
        raise BadRequest(f"Invalid request: {e}", kind, corr_id) from None
    except RecursionError:
        raise BadRequest(f"Invalid request: {_TOO_DEEP}", kind, corr_id) from None
    if admit is not None:
        admit(data)
    if kind.validate is not None and (errors := kind.validate(data)):
        raise BadRequest("; ".join(errors), kind, corr_id)
    return Request(kind, corr_id, data, envelope.auth, envelope.debug_time)


def _decode_fence(raw: bytes) -> TaskFenceRequest:
    fence = _raw_fence_decoder.decode(raw)
    return TaskFenceRequest(fence.id, fence.version, _decode_action(fence.action, "$.action"))


def _decode_fences(raw: bytes) -> TaskFencesRequest:
    fences = _raw_fences_decoder.decode(raw)
    actions = [_decode_action(a, f"$.actions[{i}]") for i, a in enumerate(fences.actions)]
    return TaskFencesRequest(fences.id, fences.version, actions)


def _decode_action(action: _RawFenceAction, where: str) -> FenceAction:
    """A fenced action, read by its kind; ``where`` locates it in the request's data."""
    decoder = _action_decoders.get(action.kind)
    if decoder is None:
        raise msgspec.ValidationError(
            f"Invalid fence action kind {action.kind!r}: "
            f"use one of {sorted(map(str, FENCE_ACTIONS))} - at `{where}.kind`"
        )
    try:
        data = decoder.decode(action.data)
    except msgspec.ValidationError as e:
        # msgspec locates errors from the root of the inner document, and says nothing at all
        # when the root itself is wrong; re-root the location so the message names the field.
        message, at, path = str(e).rpartition(" - at `$")
        if not at:
            message, path = str(e), "`"
        raise msgspec.ValidationError(f"{message} - at `{where}.data{path}") from None
    return FenceAction(action.kind, data)


_NESTED: dict[Kind, Callable[[bytes], Data]] = {
    Kind.TASK_FENCE: _decode_fence,
    Kind.TASK_FENCES: _decode_fences,
}
"""The kinds whose data nests actions of several kinds, each read by its own kind."""


def encode_request(
    kind: str, data: Data, corr_id: str, auth: str | None = None, debug_time: int | None = None
) -> bytes:
    head = RequestHead(corr_id, VERSION, auth, debug_time)
    return _encoder.encode({"kind": kind, "head": head, "data": data})


def response_envelope(kind: str, corr_id: str, reply: Reply) -> ResponseEnvelope:
    """The envelope for a handler's reply; error statuses get a string ``data``."""
    status, body = reply
    data = _wire_body(body, corr_id) if status in (200, 300) else error_text(kind, status, body)
    return ResponseEnvelope(kind, ResponseHead(corr_id, status), data)


def error_text(kind: str, status: int, body: Any) -> str:
    """An error reply's message: the text it carries, else its kind's wording."""
    if isinstance(body, str):
        return body
    known = Kind.named(kind)
    return known.message(status) if known is not None else failed(status)


def _wire_body(body: Any, corr_id: str) -> Any:
    if isinstance(body, TaskFenceResult):
        inner = response_envelope(body.kind, corr_id, body.inner)
        return {"action": inner, "preload": body.preload}
    if isinstance(body, TaskFencesResult):
        return {"fences": [response_envelope(Kind.TASK_FENCE, corr_id, f) for f in body.fences]}
    return body


def encode_response(kind: str, corr_id: str, reply: Reply) -> bytes:
    return _encoder.encode(response_envelope(kind, corr_id, reply))


def to_builtins(value: Any) -> Any:
    """A wire struct as plain JSON-shaped Python values (dicts, lists, str, int)."""
    return msgspec.to_builtins(value)


class Response(NamedTuple):
    """A response envelope read back: whose answer it is, and the reply it carries."""

    kind: str
    corr_id: str
    reply: Reply


def decode_response(body: bytes | str) -> Response:
    """A response envelope as the typed reply of its kind: a success's ``data`` as the
    kind's response type (``Kind.responses``; a fence's nested action read the same way,
    into a ``TaskFenceResult``, and each fence of a ``task.fences`` into a
    ``TaskFencesResult``), an error's as its message. ``msgspec.DecodeError`` if it is
    not the answer of a known kind."""
    envelope = _response_decoder.decode(body)
    return Response(envelope.kind, envelope.head.corr_id, _reply(envelope))


def _reply(envelope: _ReadEnvelope) -> Reply:
    kind, status = envelope.kind, envelope.head.status
    decoder = _body_decoders.get((kind, status))
    if decoder is None:
        if status in (200, 300):
            raise msgspec.ValidationError(f"{kind!r} has no {status} response")
        return Reply(status, error_text(kind, status, _any_decoder.decode(envelope.data)))
    data = decoder.decode(envelope.data)
    if isinstance(data, TaskFenceResponse):
        action = _response_decoder.decode(data.action)
        data = TaskFenceResult(action.kind, _reply(action), data.preload)
    elif isinstance(data, TaskFencesResponse):
        data = TaskFencesResult([_reply(_response_decoder.decode(f)) for f in data.fences])
    return Reply(status, data)
