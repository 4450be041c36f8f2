"""troth.protocol: the Resonate wire protocol (``2026-04-01``) as typed, validated data.

Pure data and no I/O: records, the request kinds (``Kind``) and each one's request and
response types, the messages, delivery addresses, cron arithmetic, and the envelope that
turns bytes into a typed ``Request`` (or a ``BadRequest``), a handler's ``Reply`` into
bytes, and a response's bytes back into a ``Reply``.
"""

from troth.protocol.envelope import (
    VERSION,
    BadRequest,
    Request,
    Response,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    response_envelope,
    to_builtins,
)
from troth.protocol.kinds import Kind
from troth.protocol.messages import Execute, Message, Unblock, decode_message
from troth.protocol.records import (
    PromiseRecord,
    PromiseState,
    Schedule,
    SettleState,
    TaskRecord,
    TaskRef,
    TaskState,
    Value,
)
from troth.protocol.responses import Reply, Snapshot

__all__ = [
    "VERSION",
    "BadRequest",
    "Execute",
    "Kind",
    "Message",
    "PromiseRecord",
    "PromiseState",
    "Reply",
    "Request",
    "Response",
    "Schedule",
    "SettleState",
    "Snapshot",
    "TaskRecord",
    "TaskRef",
    "TaskState",
    "Unblock",
    "Value",
    "decode_message",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "response_envelope",
    "to_builtins",
]
