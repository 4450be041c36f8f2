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
from troth.protocol.kinds import Kind
from troth.protocol.requests import DebugTickRequest
from troth.protocol.responses import EMPTY, OutboxEntry, Reply

Handler = Callable[[ServerState, Any, int], Reply]

HANDLERS: dict[Kind, Handler] = {
    Kind.PROMISE_GET: promises.promise_get,
    Kind.PROMISE_CREATE: promises.promise_create,
    Kind.PROMISE_SETTLE: promises.promise_settle,
    Kind.PROMISE_REGISTER_CALLBACK: promises.promise_register_callback,
    Kind.PROMISE_REGISTER_LISTENER: promises.promise_register_listener,
    Kind.PROMISE_SEARCH: extensions.promise_search,
    Kind.TASK_GET: tasks.task_get,
    Kind.TASK_CREATE: tasks.task_create,
    Kind.TASK_ACQUIRE: tasks.task_acquire,
    Kind.TASK_FENCE: tasks.task_fence,
    Kind.TASK_FENCES: extensions.task_fences,
    Kind.TASK_HEARTBEAT: tasks.task_heartbeat,
    Kind.TASK_SUSPEND: tasks.task_suspend,
    Kind.TASK_FULFILL: tasks.task_fulfill,
    Kind.TASK_RELEASE: tasks.task_release,
    Kind.TASK_HALT: tasks.task_halt,
    Kind.TASK_CONTINUE: tasks.task_continue,
    Kind.TASK_SEARCH: extensions.task_search,
    Kind.SCHEDULE_GET: schedules.schedule_get,
    Kind.SCHEDULE_CREATE: schedules.schedule_create,
    Kind.SCHEDULE_DELETE: schedules.schedule_delete,
    Kind.SCHEDULE_SEARCH: extensions.schedule_search,
}

# The kinds whose reply carries a preload, and the task it is computed for.
PRELOAD_TASK: dict[Kind, Callable[[Any], str]] = {
    Kind.TASK_CREATE: lambda data: data.action.data.id,
    Kind.TASK_ACQUIRE: lambda data: data.id,
    Kind.TASK_FENCE: lambda data: data.id,
    Kind.TASK_SUSPEND: lambda data: data.id,
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
            case Kind.DEBUG_START | Kind.DEBUG_STOP:
                return Reply(200, EMPTY)
            case Kind.DEBUG_RESET:
                self.state = ServerState(config=self.state.config)
                return Reply(200, EMPTY)
            case Kind.DEBUG_SNAP:
                return Reply(200, self.snapshot())
            case Kind.DEBUG_TICK:
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
