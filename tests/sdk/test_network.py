"""Reading the wire: SSE message payloads and the fence response as servers send them."""

from __future__ import annotations

import json

from troth.protocol.records import PromiseState
from troth.sdk.network import (
    Execute,
    FenceReply,
    Unblock,
    anycast,
    decode_body,
    decode_message,
    target_address,
)

PROMISE = {
    "id": "p1", "state": "resolved", "param": {}, "value": {"data": "MQ=="},
    "tags": {}, "timeoutAt": 10, "createdAt": 1, "settledAt": 5,
}  # fmt: skip


def test_execute_and_unblock_messages_decode():
    execute = (
        '{"kind":"execute","head":{"serverUrl":"http://x"},"data":{"task":{"id":"t","version":3}}}'
    )
    assert decode_message(execute) == Execute("t", 3)
    unblock = json.dumps({"kind": "unblock", "head": {}, "data": {"promise": PROMISE}})
    message = decode_message(unblock)
    assert isinstance(message, Unblock) and message.promise.state == PromiseState.RESOLVED
    assert decode_message('{"kind":"other","head":{},"data":{}}') is None


def test_a_fence_reply_carries_the_inner_status_promise_and_preload():
    body = {
        "action": {
            "kind": "promise.create",
            "head": {"corrId": "c", "status": 200, "version": "2026-04-01"},
            "data": {"promise": PROMISE},
        },
        "preload": [PROMISE],
    }
    reply = decode_body("task.fence", 200, json.dumps(body).encode())
    assert isinstance(reply, FenceReply)
    assert (reply.status, reply.promise.id, len(reply.preload)) == (200, "p1", 1)
    body["action"] = {"kind": "promise.settle", "head": {"status": 404}, "data": "not found"}
    assert decode_body("task.fence", 200, json.dumps(body).encode()).promise is None


def test_targets_are_groups_or_full_addresses():
    assert target_address("payments") == "poll://any@payments"
    assert target_address("http://hook.example/x") == "http://hook.example/x"
    assert anycast("g", "w1") == "poll://any@g/w1"
