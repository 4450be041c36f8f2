"""Requests built by hand, for the protocol and conformance tests: one valid ``data`` per
kind, and helpers that decode a body expecting acceptance or a 400.

Bodies are written with ``json.dumps`` rather than ``encode_request`` so that decoding is
judged against JSON the way a client writes it, not against troth's own encoder.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from troth.protocol import BadRequest, Request, decode_request

VERSION = "2026-04-01"
CORR = "c-1"
TARGET = "poll://any@workers"

HEAD: dict[str, Any] = {"corrId": CORR, "version": VERSION}

# One valid ``data`` per kind (docs/references.md#request-kinds, and troth's task.fences:
# docs/semantics.md, "Batched fences"). The task id is "p"
# throughout so that awaited/fenced ids in the same origin are its child "p:1" (ids:
# ``<origin>:<lineage>``).
VALID: dict[str, dict[str, Any]] = {
    "promise.get": {"id": "p"},
    "promise.create": {"id": "p", "timeoutAt": 1000},
    "promise.settle": {"id": "p", "state": "resolved"},
    "promise.register_callback": {"awaited": "p:1", "awaiter": "p"},
    "promise.register_listener": {"awaited": "p", "address": TARGET},
    "promise.search": {},
    "task.get": {"id": "p"},
    "task.create": {
        "pid": "w1",
        "ttl": 30000,
        "action": {
            "kind": "promise.create",
            "head": {},
            "data": {"id": "p", "timeoutAt": 1000, "tags": {"resonate:target": TARGET}},
        },
    },
    "task.acquire": {"id": "p", "version": 0, "pid": "w1", "ttl": 30000},
    "task.release": {"id": "p", "version": 1},
    "task.fulfill": {
        "id": "p",
        "version": 1,
        "action": {"kind": "promise.settle", "head": {}, "data": {"id": "p", "state": "resolved"}},
    },
    "task.suspend": {
        "id": "p",
        "version": 1,
        "actions": [
            {
                "kind": "promise.register_callback",
                "head": {},
                "data": {"awaited": "p:1", "awaiter": "p"},
            }
        ],
    },
    "task.fence": {
        "id": "p",
        "version": 1,
        "action": {"kind": "promise.create", "data": {"id": "p:1", "timeoutAt": 1000}},
    },
    "task.fences": {
        "id": "p",
        "version": 1,
        "actions": [
            {"kind": "promise.create", "head": {}, "data": {"id": "p:1", "timeoutAt": 1000}},
            {"kind": "promise.settle", "head": {}, "data": {"id": "p:1", "state": "resolved"}},
        ],
    },
    "task.heartbeat": {"pid": "w1", "tasks": [{"id": "p", "version": 1}]},
    "task.halt": {"id": "p"},
    "task.continue": {"id": "p"},
    "task.search": {},
    "schedule.get": {"id": "s"},
    "schedule.create": {
        "id": "s",
        "cron": "* * * * *",
        "promiseId": "{{.id}}.{{.timestamp}}",
        "promiseTimeout": 60000,
        "promiseTags": {"resonate:target": TARGET},
    },
    "schedule.delete": {"id": "s"},
    "schedule.search": {},
    "debug.start": {},
    "debug.stop": {},
    "debug.reset": {},
    "debug.snap": {},
    "debug.tick": {"time": 0},
    # troth's queues (docs/queues.md).
    "queue.set": {"queue": {"name": "q", "concurrency": 2}},
    "queue.get": {"name": "q"},
    "queue.search": {},
}

DELETE = object()
"""A value for ``mutate`` meaning: remove the key."""

Path = tuple[str | int, ...]


def mutate(data: Any, path: Path, value: Any) -> Any:
    """A deep copy of ``data`` with the value at ``path`` replaced (or removed: ``DELETE``)."""
    out = copy.deepcopy(data)
    parent = out
    for step in path[:-1]:
        parent = parent[step]
    if value is DELETE:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return out


def body(kind: Any, data: Any, **head: Any) -> bytes:
    """A request envelope as JSON bytes; ``head`` entries are added to (or override) HEAD."""
    return json.dumps({"kind": kind, "head": {**HEAD, **head}, "data": data}).encode()


def accept(raw: bytes) -> Request:
    return decode_request(raw)


def refuse(raw: bytes) -> BadRequest:
    """Decode ``raw`` expecting a 400, and check the invariants every 400 shares."""
    with pytest.raises(BadRequest) as info:
        decode_request(raw)
    error = info.value
    assert error.status == 400
    assert isinstance(error.message, str) and error.message
    assert isinstance(error.kind, str) and isinstance(error.corr_id, str)
    return error
