"""troth.protocol: the Resonate wire protocol (``2026-04-01``) as typed, validated data.

Pure data and no I/O: records, the request and response of every kind, delivery
addresses, cron arithmetic, and the envelope that turns bytes into a typed ``Request``
(or a ``BadRequest``) and a handler's ``Reply`` back into bytes.
"""

from troth.protocol.envelope import (
    VERSION,
    BadRequest,
    Request,
    decode_request,
    encode_request,
    encode_response,
    response_envelope,
    to_builtins,
)
from troth.protocol.kinds import KINDS
from troth.protocol.records import (
    PromiseRecord,
    PromiseState,
    Schedule,
    SettleState,
    TaskRecord,
    TaskState,
    Value,
)
from troth.protocol.responses import Reply, Snapshot

__all__ = [
    "KINDS",
    "VERSION",
    "BadRequest",
    "PromiseRecord",
    "PromiseState",
    "Reply",
    "Request",
    "Schedule",
    "SettleState",
    "Snapshot",
    "TaskRecord",
    "TaskState",
    "Value",
    "decode_request",
    "encode_request",
    "encode_response",
    "response_envelope",
    "to_builtins",
]
