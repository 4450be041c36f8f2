"""Projection on read: how a promise past its deadline is answered before it is swept.

A pending promise whose ``timeoutAt <= now`` is *dead*: every handler answers it as settled
(timers resolve, everything else times out, ``settledAt = timeoutAt``) without writing
anything. Only the promise-timeout transition writes that verdict and runs the settlement
chain, so reads stay free of side effects and the sweep stays the single writer.
"""

from __future__ import annotations

from msgspec.structs import replace

from troth.protocol.records import PromiseRecord, PromiseState, timed_out_state


def is_live(promise: PromiseRecord, now: int) -> bool:
    """Pending and not past its deadline (the deadline is exclusive)."""
    return promise.state == PromiseState.PENDING and promise.timeout_at > now


def timed_out(promise: PromiseRecord) -> PromiseRecord:
    """The record the promise's own deadline gives it."""
    return replace(promise, state=timed_out_state(promise.tags), settled_at=promise.timeout_at)


def project(promise: PromiseRecord, now: int) -> PromiseRecord:
    """The record as observed at ``now``."""
    if promise.state == PromiseState.PENDING and promise.timeout_at <= now:
        return timed_out(promise)
    return promise
