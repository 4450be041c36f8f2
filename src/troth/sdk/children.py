"""A context's child promises: ``rpc``, ``detached``, ``sleep`` and ``promise`` calls.

``create`` writes a child's promise (or finds it in the history), checks it against the
call that meets it (``troth.sdk.replay``), and returns its record for the call's future.
It also owns what a canceled execution does with its calls (``troth.sdk.cancellation``):
a call made after the cancellation is recorded as refused (``refused``), a pending sleep or
promise of its own is settled canceled (``refuse``), and a remote child is asked to stop in
turn. The local steps (``troth.sdk.steps``) refuse their calls the same way.

The ``Context`` builds each call's request; this module only sees its ``Frame``.
"""

from __future__ import annotations

import msgspec

from troth.protocol.conventions import CANCELED_TAG
from troth.protocol.ids import child_id, descends
from troth.protocol.records import TARGET, TIMER, PromiseRecord, PromiseState, SettleState, Value
from troth.protocol.requests import PromiseCreateRequest
from troth.sdk.codec import encode_error
from troth.sdk.errors import CanceledError
from troth.sdk.execution import Execution
from troth.sdk.frames import Frame
from troth.sdk.replay import Call


def timer_of(id: str) -> str:
    """The timer beside a promise the server does not time out on its own (see ``create``)."""
    return child_id(id, "deadline")


async def create(
    frame: Frame,
    id: str,
    call: Call,
    request: PromiseCreateRequest,
    shielded: bool,
    deadline_timer: bool = False,
) -> PromiseRecord:
    """A child promise created (or found); ``shielded`` as the call was made (inside
    ``ctx.shield()`` or not); ``deadline_timer`` adds a timer at its deadline, for promises
    the server does not time out on its own (see below)."""
    execution = frame.execution
    await frame.recorded()
    record = execution.recorded(id)
    if record is None:
        refused = execution.canceled(shielded) is not None
        made = _refused(request, frame.timeout_at) if refused else request
        if call.kind in ("rpc", "detached") and not refused:
            # Its trace context goes in the param, for the worker that runs it.
            tracing = execution.runtime.tracing
            with tracing.rpc(call.kind, call.name or call.kind, made) as rpc:
                record = await execution.create(rpc.request)
                rpc.answered(record)
        else:
            record = await execution.create(made)
    else:
        execution.runtime.tracing.replayed(record)
        execution.runtime.metrics.replayed(execution)
    execution.check(record, call)
    if record.state == PromiseState.PENDING:
        record = await _pending(execution, record, call.kind, shielded)
    if deadline_timer and record.state == PromiseState.PENDING:
        # A promise without a target is not swept at its deadline (Lean arms promise
        # timeouts only for targeted and timer promises), so nothing would resume an
        # execution awaiting it. A timer at the same instant, awaited alongside,
        # resumes it; the replay then reads the promise as timed out.
        timer_id = timer_of(id)
        tags = {**frame.tags(timer_id, "global"), TIMER: "true"}
        timer = PromiseCreateRequest(timer_id, record.timeout_at, Value(), tags)
        if execution.recorded(timer_id) is None:
            await execution.create(timer)
    return record


async def _pending(
    execution: Execution, record: PromiseRecord, kind: str, shielded: bool
) -> PromiseRecord:
    """What a canceled execution does with a pending child promise: a refused call's
    record and its own sleep or promise are settled canceled (the await raises); a
    remote child is asked to stop in turn, and awaited for its outcome."""
    if CANCELED_TAG in record.tags:
        return await refuse(execution, record)
    if kind in ("sleep", "promise"):
        ours = descends(record.id, execution.root.id)
        if ours and execution.canceled(shielded) is not None:
            return await refuse(execution, record)
    elif kind in ("rpc", "detached"):
        execution.track_remote(record, kind == "detached", shielded)
    return record


def canceled(execution: Execution) -> tuple[SettleState, Value]:
    """A call given up because its execution was canceled (a step, between attempts)."""
    error = execution.canceled(False) or CanceledError(execution.root.id)
    return SettleState.REJECTED_CANCELED, encode_error(execution.runtime.codec, error)


async def refuse(execution: Execution, record: PromiseRecord) -> PromiseRecord:
    """Settle a call's pending record as canceled: it raises ``CanceledError``."""
    state, value = canceled(execution)
    return await execution.settle(record.id, state, value)


def _refused(request: PromiseCreateRequest, deadline: int) -> PromiseCreateRequest:
    """The record of a call refused because its execution was canceled: its own tags, so
    the replay check knows it, but no target (nothing is to run it) and no timer, with the
    execution's ``deadline`` (a sleep's wake may be past already: the promise would read as
    resolved, or timed out, before it is settled canceled)."""
    tags = {k: v for k, v in request.tags.items() if k not in (TARGET, TIMER)}
    tags[CANCELED_TAG] = "true"
    return msgspec.structs.replace(request, tags=tags, timeout_at=deadline)
