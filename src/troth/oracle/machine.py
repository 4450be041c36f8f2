"""The oracle: request envelopes in, response envelopes out, over the transliterated machine.

``Oracle.apply`` is the whole surface a test needs: it decodes with ``troth.protocol`` (a
client mistake becomes its 400 and touches nothing), runs the Lean handler for the kind at
``now = head["resonate:debug_time"]`` (or the last ``now`` used), fills preload for the
kinds that carry it, and answers the debug kinds itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from troth.oracle import extensions, promises, schedules, tasks
from troth.oracle.snapshot import snapshot
from troth.oracle.state import MachineConfig, ServerState
from troth.oracle.tick import tick
from troth.protocol import (
    BadRequest,
    Request,
    Snapshot,
    decode_request,
    response_envelope,
    to_builtins,
)
from troth.protocol.requests import DebugTickRequest
from troth.protocol.responses import EMPTY, OutboxEntry, Reply

Handler = Callable[[ServerState, Any, int], Reply]

HANDLERS: dict[str, Handler] = {
    "promise.get": promises.promise_get,
    "promise.create": promises.promise_create,
    "promise.settle": promises.promise_settle,
    "promise.register_callback": promises.promise_register_callback,
    "promise.register_listener": promises.promise_register_listener,
    "promise.search": extensions.promise_search,
    "task.get": tasks.task_get,
    "task.create": tasks.task_create,
    "task.acquire": tasks.task_acquire,
    "task.fence": tasks.task_fence,
    "task.heartbeat": tasks.task_heartbeat,
    "task.suspend": tasks.task_suspend,
    "task.fulfill": tasks.task_fulfill,
    "task.release": tasks.task_release,
    "task.halt": tasks.task_halt,
    "task.continue": tasks.task_continue,
    "task.search": extensions.task_search,
    "schedule.get": schedules.schedule_get,
    "schedule.create": schedules.schedule_create,
    "schedule.delete": schedules.schedule_delete,
    "schedule.search": extensions.schedule_search,
}

# The kinds whose reply carries a preload, and the task it is computed for.
PRELOAD_TASK: dict[str, Callable[[Any], str]] = {
    "task.create": lambda data: data.action.data.id,
    "task.acquire": lambda data: data.id,
    "task.fence": lambda data: data.id,
    "task.suspend": lambda data: data.id,
}

TICK_TIME_MISMATCH = "resonate:debug_time must equal data.time"


class Oracle:
    """The Lean machine at 83d64c3 in memory, with troth's extensions and debug kinds."""

    def __init__(self, retry_timeout: int = 5000) -> None:
        self.state = ServerState(config=MachineConfig(retry_timeout=retry_timeout))
        self.now = 0

    def apply(self, envelope: dict[str, Any]) -> dict[str, Any]:
        """One request envelope (JSON-shaped) in, its response envelope out."""
        try:
            request = decode_request(msgspec.json.encode(envelope))
        except BadRequest as e:
            return to_builtins(response_envelope(e.kind, e.corr_id, e.reply()))
        reply = self.handle(request)
        return to_builtins(response_envelope(request.kind, request.corr_id, reply))

    def handle(self, request: Request) -> Reply:
        kind, data = request.kind, request.data
        if isinstance(data, DebugTickRequest) and request.debug_time not in (None, data.time):
            return Reply(400, TICK_TIME_MISMATCH)
        if request.debug_time is not None:
            self.now = request.debug_time
        match kind:
            case "debug.start" | "debug.stop":
                return Reply(200, EMPTY)
            case "debug.reset":
                self.state = ServerState(config=self.state.config)
                return Reply(200, EMPTY)
            case "debug.snap":
                return Reply(200, self.snapshot())
            case "debug.tick":
                assert isinstance(data, DebugTickRequest)  # the kind's decoder made it one
                self.tick(data.time)
                return Reply(200, [])
        reply = HANDLERS[kind](self.state, data, self.now)
        task_of = PRELOAD_TASK.get(kind)
        if task_of is not None:
            reply = extensions.with_preload(self.state, task_of(data), reply)
        return reply

    def tick(self, time: int) -> None:
        """Fire every timeout due by ``time``, each transition at ``now = time``."""
        self.now = time
        tick(self.state, time)

    def snapshot(self) -> Snapshot:
        return snapshot(self.state)

    def messages(self) -> list[OutboxEntry]:
        """The outbox in wire shape (``head: {}``), in the snapshot's order."""
        return self.snapshot().messages
