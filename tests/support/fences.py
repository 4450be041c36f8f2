"""``task.fences`` judged by its definition: the standard ``task.fence`` requests of the
batch, sent one by one to a machine (the oracle), make the answer the batch must get
(docs/semantics.md, "Batched fences")."""

from __future__ import annotations

import json
from typing import Any, Protocol

from tests.support.snapshots import from_wire
from troth.protocol import VERSION, BadRequest, Snapshot, decode_request

Envelope = dict[str, Any]


class Machine(Protocol):
    def apply(self, envelope: Envelope) -> Envelope: ...


def as_fences(envelope: Envelope) -> list[Envelope]:
    """The standard ``task.fence`` requests a ``task.fences`` batch stands for, in order,
    each with the batch's head."""
    data = envelope["data"]
    return [
        {
            "kind": "task.fence",
            "head": envelope["head"],
            "data": {"id": data["id"], "version": data["version"], "action": action},
        }
        for action in data["actions"]
    ]


def refused(envelope: Envelope) -> bool:
    """Whether the doors refuse the request (a 400 before any state is touched)."""
    try:
        decode_request(json.dumps(envelope).encode())
    except BadRequest:
        return True
    return False


def one_by_one(machine: Machine, request: Envelope) -> tuple[Envelope, list[Snapshot]]:
    """``machine``'s answer to ``request``, and the states it passed through on the way
    (none, for one request). A valid ``task.fences`` is sent as its fences, and answered
    with their answers (the batch's corrId, preloads emptied) and the state after each
    fence but the last."""
    if request["kind"] != "task.fences" or refused(request):
        return machine.apply(request), []
    fences, passed = [], []
    for fence in as_fences(request):
        answer = machine.apply(fence)
        if answer["head"]["status"] == 200:
            answer["data"]["preload"] = []
        fences.append(answer)
        snap = {"kind": "debug.snap", "head": request["head"], "data": {}}
        passed.append(from_wire(machine.apply(snap)["data"]))
    head = {"corrId": request["head"]["corrId"], "status": 200, "version": VERSION}
    return {"kind": "task.fences", "head": head, "data": {"fences": fences}}, passed[:-1]
