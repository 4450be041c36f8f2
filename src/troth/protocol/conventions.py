"""troth's own conventions on top of the protocol: the tags and ids its SDK writes.

The protocol knows promises and tasks; an execution's call tree, a step's attempts, a halt
or a cancellation are troth's reading of ordinary promises, by these tags and ids. They
live here, below everything, because the SDK writes them and the views (``troth.views``:
the CLI and the console) read them: one definition for both.
"""

from __future__ import annotations

from troth.protocol.ids import child_id, origin
from troth.protocol.records import BRANCH, ORIGIN, PARENT, TIMER, PromiseRecord, Value
from troth.protocol.requests import PromiseCreateRequest

SCOPE = "resonate:scope"
"""``local`` for a step run in the execution's own process, ``global`` for a promise any
process may settle (the convention of the Resonate SDKs)."""

CODEC_HEADER = "troth:codec"
"""On a value: the serializer that wrote its ``data`` (no header: JSON, as the official
SDKs write)."""

TRACEPARENT = "traceparent"
"""On an execution's param: the W3C trace context of the span that created it
(``tracestate`` beside it when the trace has one), so that the server and every worker that
runs it join that trace (docs/tracing.md). The names the Resonate TypeScript SDK's
OpenTelemetry package writes in the same place, so that mixed-language traces join."""

FUNC_TAG = "troth:func"
"""On an execution's root promise: the name of the function it runs. With ``troth:args``
(the digest of its arguments, ``ARGS_TAG``) it says which work an id was started for, so
that starting the id again with other work is refused."""

STEP_TAG = "troth:step"
"""What a child promise was created for: ``run:<function>``, ``rpc:<function>``,
``detached:<function>``, ``sleep``, ``promise``, ``now``, ``random``, ``uuid``,
``attempt``."""

ARGS_TAG = "troth:args"
"""A digest of the call's arguments (absent for calls without arguments)."""

ATTEMPT_TAG = "troth:attempt"
"""On an attempt record (``<step>.attempt<n>``): the number of the attempt that failed."""

RETRY_AT_TAG = "troth:retry_at"
"""On an attempt record: when the next attempt starts (ms since the epoch)."""

STALLED_HEADER = "troth:stalled-ms"
"""A value header of a step (or an execution's root) whose code blocked the event loop: its
longest stall, in ms (``troth.sdk.stalls``)."""

INTERRUPTED_TAG = "troth:interrupted"
"""On an attempt record of an attempt that was cut off (its run lost the task's lease): why,
in words. Consecutive ones count towards ``Troth(max_lease_losses=...)``."""

CANCEL_TAG = "troth:cancel"
"""On a cancel promise: ``request`` (settled by whoever cancels), or ``timeout`` (a timer
at the instant the execution's grace period begins)."""

CANCEL_AT_TAG = "troth:cancel_at"
"""On an execution's root: when it is canceled cooperatively (ms), ``grace`` before its
deadline."""

CANCELED_TAG = "troth:canceled"
"""On a call's record made after its execution was canceled: the call was refused, its
record settled ``rejected_canceled``, and its function never runs."""


def attempt_id(step_id: str, attempt: int) -> str:
    """The record of a step's failed ``attempt`` (1, 2, ...)."""
    return child_id(step_id, f"attempt{attempt}")


def halt_id(execution_id: str, n: int) -> str:
    """The id of the record of an execution's n-th halt (1, 2, ...)."""
    return child_id(execution_id, f"halt{n}")


def cancel_id(execution_id: str) -> str:
    """An execution's cancel promise: resolving it asks the execution to stop."""
    return child_id(execution_id, "cancel")


def cancel_request(root: PromiseRecord) -> PromiseCreateRequest:
    """The (pending) cancel promise of the execution whose promise is ``root``. It shares the
    execution's branch, so that every run of the execution finds it in its preload."""
    id = cancel_id(root.id)
    tags = {
        ORIGIN: root.tags.get(ORIGIN) or origin(root.id),
        PARENT: root.id,
        BRANCH: root.tags.get(BRANCH) or root.id,
        CANCEL_TAG: "request",
    }
    at = root.timeout_at
    cancel_at = root.tags.get(CANCEL_AT_TAG, "")
    if cancel_at.isdigit():
        tags.update({TIMER: "true", CANCEL_TAG: "timeout"})
        at = min(at, int(cancel_at))
    return PromiseCreateRequest(id, at, Value(), tags)
