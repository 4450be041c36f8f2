"""The messages the server sends to workers and listeners: ``execute`` and ``unblock``.

They are one tagged union, ``Message``: the ``kind`` field of the JSON picks the struct, so
one decoder reads any message, whether from an SSE frame, an HTTP push or an outbox row
(docs/references.md#messages).
"""

from __future__ import annotations

from typing import ClassVar, Literal

import msgspec

from troth.protocol.records import PromiseRecord, Record, TaskRef


class MessageHead(Record):
    """``serverUrl``: where the worker should send its requests about an ``execute``'s task
    (the server that delivered it, if configured). An ``unblock``'s head is empty."""

    server_url: str | None = None


class ExecuteData(Record):
    task: TaskRef


class UnblockData(Record):
    promise: PromiseRecord


class Execute(Record, tag_field="kind", tag="execute"):
    """Run (or resume) the task, presenting its version to acquire it."""

    kind: ClassVar[Literal["execute"]] = "execute"
    head: MessageHead
    data: ExecuteData


class Unblock(Record, tag_field="kind", tag="unblock"):
    """A promise the address listens to has settled (the record as it was then)."""

    kind: ClassVar[Literal["unblock"]] = "unblock"
    head: MessageHead
    data: UnblockData


Message = Execute | Unblock

MESSAGE_KINDS = frozenset({Execute.kind, Unblock.kind})


def execute_message(task_id: str, version: int, server_url: str | None = None) -> Execute:
    return Execute(MessageHead(server_url), ExecuteData(TaskRef(task_id, version)))


def unblock_message(promise: PromiseRecord) -> Unblock:
    return Unblock(MessageHead(), UnblockData(promise))


class _Kind(msgspec.Struct):
    kind: str


_message = msgspec.json.Decoder(Message)
_kind = msgspec.json.Decoder(_Kind)


def decode_message(raw: bytes | str) -> Message:
    """A message as JSON; ``msgspec.DecodeError`` if it is not one."""
    return _message.decode(raw)


def decode_delivered(raw: bytes | str) -> Message | None:
    """A message as a receiver reads it: None for a kind this protocol does not define (a
    newer server's), which the receiver skips; ``msgspec.DecodeError`` if it is not a
    message at all."""
    try:
        return _message.decode(raw)
    except msgspec.ValidationError:
        if _kind.decode(raw).kind in MESSAGE_KINDS:
            raise
        return None
