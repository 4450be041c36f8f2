"""Reading the wire back: a response envelope as its kind's typed reply, and messages as
the one tagged union, as a client (the SDK, the tests) reads what a server sends."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from troth.protocol import Kind, Reply, decode_message, decode_response, encode_response
from troth.protocol.messages import Execute, Unblock, decode_delivered, execute_message
from troth.protocol.records import PromiseRecord, PromiseState, TaskRecord, TaskState
from troth.protocol.responses import (
    EMPTY,
    PromiseResponse,
    TaskClaimResponse,
    TaskFenceResult,
    TaskFencesResult,
    TaskSuspendedResponse,
)

PROMISE = {
    "id": "p1", "state": "resolved", "param": {}, "value": {"data": "MQ=="},
    "tags": {}, "timeoutAt": 10, "createdAt": 1, "settledAt": 5,
}  # fmt: skip
RECORD = msgspec.convert(PROMISE, PromiseRecord)
TASK = TaskRecord("p1", TaskState.ACQUIRED, 1, 0, 30_000, "w1")


def envelope(kind: str, status: int, data: Any, corr_id: str = "c") -> bytes:
    head = {"corrId": corr_id, "status": status, "version": "2026-04-01"}
    return json.dumps({"kind": kind, "head": head, "data": data}).encode()


# -- responses --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "reply"),
    [
        (Kind.PROMISE_GET, Reply(200, PromiseResponse(RECORD))),
        (Kind.TASK_ACQUIRE, Reply(200, TaskClaimResponse(RECORD, [RECORD], TASK))),
        (Kind.TASK_SUSPEND, Reply(300, TaskSuspendedResponse([RECORD]))),
        (Kind.TASK_SUSPEND, Reply(200, EMPTY)),
        (Kind.TASK_HEARTBEAT, Reply(200, EMPTY)),
        (Kind.DEBUG_TICK, Reply(200, [])),
    ],
)
def test_a_success_reads_back_as_its_kinds_response_type(kind: Kind, reply: Reply) -> None:
    answer = decode_response(encode_response(kind, "c7", reply))
    assert (answer.kind, answer.corr_id, answer.reply) == (kind, "c7", reply)
    assert type(answer.reply.body) is type(reply.body)


def test_an_error_reads_back_as_its_message() -> None:
    answer = decode_response(encode_response(Kind.PROMISE_GET, "c", Reply(404)))
    assert answer.reply == Reply(404, "Promise not found")
    refused = decode_response(envelope("unknown", 400, "Invalid request envelope"))
    assert refused.reply == Reply(400, "Invalid request envelope")


def test_an_error_without_a_string_gets_its_kinds_message() -> None:
    assert decode_response(envelope("task.get", 404, None)).reply == Reply(404, "Task not found")


def test_a_success_of_the_wrong_shape_or_an_unknown_kind_is_not_a_response() -> None:
    with pytest.raises(msgspec.DecodeError):
        decode_response(envelope("promise.get", 200, {"task": {}}))
    with pytest.raises(msgspec.DecodeError):
        decode_response(envelope("no.such", 200, {}))
    with pytest.raises(msgspec.DecodeError):
        decode_response(b"<html>Bad Gateway</html>")


def test_a_fence_reads_back_with_its_nested_reply_and_preload() -> None:
    body = {
        "action": {
            "kind": "promise.create",
            "head": {"corrId": "c", "status": 200, "version": "2026-04-01"},
            "data": {"promise": PROMISE},
        },
        "preload": [PROMISE],
    }
    fence = decode_response(envelope("task.fence", 200, body)).reply.body
    assert fence == TaskFenceResult(
        Kind.PROMISE_CREATE, Reply(200, PromiseResponse(RECORD)), [RECORD]
    )
    body["action"] = {"kind": "promise.settle", "head": {"status": 404}, "data": "not found"}
    fence = decode_response(envelope("task.fence", 200, body)).reply.body
    assert fence.inner == Reply(404, "not found")


def test_a_fence_written_by_the_envelope_reads_back_as_the_handler_returned_it() -> None:
    result = TaskFenceResult(Kind.PROMISE_SETTLE, Reply(200, PromiseResponse(RECORD)), [])
    answer = decode_response(encode_response(Kind.TASK_FENCE, "c", Reply(200, result)))
    assert answer.reply == Reply(200, result)


def test_a_batch_of_fences_is_written_as_task_fence_envelopes_and_reads_back() -> None:
    created = TaskFenceResult(Kind.PROMISE_CREATE, Reply(200, PromiseResponse(RECORD)), [])
    missing = TaskFenceResult(Kind.PROMISE_SETTLE, Reply(404, "Promise not found"), [])
    refused = Reply(409, Kind.TASK_FENCE.message(409))
    batch = TaskFencesResult([Reply(200, created), Reply(200, missing), refused])
    wire = encode_response(Kind.TASK_FENCES, "c9", Reply(200, batch))

    fences = json.loads(wire)["data"]["fences"]
    # Each element is the whole answer task.fence would have sent, under the batch's corrId.
    assert [(f["kind"], f["head"]["corrId"], f["head"]["status"]) for f in fences] == [
        ("task.fence", "c9", 200),
        ("task.fence", "c9", 200),
        ("task.fence", "c9", 409),
    ]
    alone = encode_response(Kind.TASK_FENCE, "c9", Reply(200, created))
    assert fences[0] == json.loads(alone)
    assert fences[2]["data"] == Kind.TASK_FENCE.message(409)

    answer = decode_response(wire)
    assert (answer.kind, answer.corr_id, answer.reply) == (
        Kind.TASK_FENCES,
        "c9",
        Reply(200, batch),
    )


# -- messages ---------------------------------------------------------------------------------


def test_execute_and_unblock_messages_decode_as_the_tagged_union() -> None:
    execute = (
        '{"kind":"execute","head":{"serverUrl":"http://x"},"data":{"task":{"id":"t","version":3}}}'
    )
    assert decode_message(execute) == execute_message("t", 3, "http://x")
    assert isinstance(decode_message(execute), Execute)
    unblock = decode_message(
        json.dumps({"kind": "unblock", "head": {}, "data": {"promise": PROMISE}})
    )
    assert isinstance(unblock, Unblock) and unblock.data.promise.state == PromiseState.RESOLVED


def test_a_message_encodes_with_its_kind_first_as_it_decodes() -> None:
    message = execute_message("t", 3)
    assert msgspec.json.encode(message).startswith(b'{"kind":"execute"')
    assert decode_message(msgspec.json.encode(message)) == message


def test_a_receiver_skips_a_kind_it_does_not_know_and_refuses_what_is_not_a_message() -> None:
    assert decode_delivered('{"kind":"other","head":{},"data":{}}') is None
    with pytest.raises(msgspec.DecodeError):
        decode_message('{"kind":"other","head":{},"data":{}}')
    with pytest.raises(msgspec.DecodeError):
        decode_delivered('{"kind":"execute","head":{},"data":{}}')
    with pytest.raises(msgspec.DecodeError):
        decode_delivered("not json")
