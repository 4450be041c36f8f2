"""Cooperative cancellation on the protocol as it is: one promise per execution.

Asking an execution to stop (``app.cancel``) resolves its *cancel promise*, the child
``cancel`` of its id (``order-7:cancel``, ``order-7:2.cancel`` for an rpc child), with the
reason. Anything that can settle a promise can cancel an execution this way, in any
language: create the promise if it is absent (these tags, the execution's deadline) and
resolve it with ``{"reason": ...}``.

The execution is woken wherever it is:

- suspended (with or without a worker running): every suspend of a troth execution awaits
  its cancel promise too (the run creates it, pending, before its first suspend), so the
  settlement resumes the task like any awaited promise;
- running: a run that lasts more than ``WATCH_DELAY`` registers a listener on the cancel
  promise, so this process hears of it at once (short runs pay nothing);
- not yet started: the promise shares the execution's branch, so the preload of its next
  run carries it.

The execution then observes ``CanceledError`` at its durable calls (see
``troth.sdk.context``); replay stays exact because every such observation is a record: a
call made after the cancellation is recorded as refused (``troth:canceled``, settled
``rejected_canceled`` without running), and a sleep or promise still pending is settled
``rejected_canceled``. Remote children are asked in turn, through their own cancel promise.

A timeout with cleanup (the ``grace`` option) is the same promise as a *timer* at the
instant the grace period begins (the root's ``troth:cancel_at``): the server resolves it
then, with no value, which reads as a ``TimedOutError`` reason.
"""

from __future__ import annotations

from typing import NamedTuple

from troth.protocol.conventions import CANCEL_AT_TAG, CANCEL_TAG
from troth.protocol.records import (
    PromiseRecord,
    PromiseState,
    Value,
)
from troth.sdk.codec import Codec, error_from_json, error_to_json, is_error_json
from troth.sdk.errors import CanceledError, TimedOutError
from troth.sdk.options import DEADLINE_TAG, DeadlineSource, Options

WATCH_DELAY = 0.5
"""Seconds a run goes on before it listens for its cancellation (see the module)."""


def grace_tags(opts: Options, at: int, source: DeadlineSource | None) -> dict[str, str]:
    """The root tag of an execution started with the ``grace`` option: when it is canceled
    cooperatively (``TimedOutError``), ``grace`` before its deadline ``at``."""
    if opts.grace is None:
        return {}
    if source is None:
        raise ValueError("the grace option needs a deadline: give a timeout as well")
    return {CANCEL_AT_TAG: str(max(0, at - round(opts.grace.total_seconds() * 1000)))}


def reason_value(codec: Codec, reason: str | BaseException | None, detached: bool) -> Value:
    """What a cancel promise is resolved with: the reason, and whether detached children
    are canceled too."""
    data: dict[str, object] = {
        "reason": error_to_json(reason) if isinstance(reason, BaseException) else reason
    }
    if detached:
        data["detached"] = True
    return codec.encode(data)


class Cancellation(NamedTuple):
    """A cancellation an execution has received."""

    error: CanceledError  # what its durable calls raise
    value: Value  # what its children's cancel promises are resolved with
    detached: bool  # detached children are canceled too


def received(
    record: PromiseRecord | None, root: PromiseRecord, codec: Codec
) -> Cancellation | None:
    """The cancellation a cancel promise holds, or None if it holds none (still pending, or
    rejected: tidied after the execution ended, or past the execution's deadline)."""
    if record is None or record.state != PromiseState.RESOLVED:
        return None
    try:
        data = codec.decode(record.value)
    except Exception:
        data = None
    reason: str | BaseException | None = None
    detached = False
    if isinstance(data, dict) and "reason" in data:
        raw = data["reason"]
        if is_error_json(raw):
            reason = error_from_json(raw)
        elif raw is not None:
            reason = raw if isinstance(raw, str) else repr(raw)
        detached = data.get("detached") is True
    elif record.tags.get(CANCEL_TAG) == "timeout":
        # The timer fired: the grace period before the deadline has begun.
        reason = TimedOutError(root.id, root.timeout_at, root.tags.get(DEADLINE_TAG))
    value = reason_value(codec, reason, detached)  # passed on: a timer's holds none
    return Cancellation(CanceledError(root.id, reason), value, detached)
