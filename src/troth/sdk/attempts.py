"""Durable attempt counts: each failed attempt of a step is a record of its own.

A retry policy's bound must hold across crashes (four attempts means four, whatever is
killed when), and an operator must see why a step is still pending. So when an attempt
fails and the policy allows another, the failure is recorded before the wait, as a child
promise of the step: ``<step>.attempt<n>``, rejected with the attempt's error, tagged with
its number and the instant the next attempt starts. A run that resumes a pending step
counts these records to know which attempt comes next and how long to wait for it.

An attempt cut off by a lost lease is recorded too, tagged ``troth:interrupted`` with why:

- by the run that lost the lease, when it finds its outcome refused (``record_lost``): the
  one write a run makes without holding its task. It adds an attempt record, never a
  step's outcome, and it is what carries the cause (say, how long the step blocked the
  event loop) to the run that takes over;
- else by the run that takes over, when it resumes a step an earlier run left pending.

Consecutive interrupted attempts of a step (``cut_off``) are bounded by
``Troth(max_lease_losses=...)``: past it the task is halted with the causes, rather than
run the step (and its effects) again and again.

The last attempt's error is the step's own rejection, so it is not recorded twice. The
records share the step's branch, so the server's preload carries them to a resuming worker
and counting them costs no request; a step started by another run is counted against the
server as well (one ``promise.get`` past the last record), since a cache is no proof of
absence.
"""

from __future__ import annotations

import logging

from troth.protocol.conventions import (
    ATTEMPT_TAG,
    INTERRUPTED_TAG,
    RETRY_AT_TAG,
    SCOPE,
    STEP_TAG,
    attempt_id,
)
from troth.protocol.kinds import Kind
from troth.protocol.records import (
    BRANCH,
    ORIGIN,
    PARENT,
    PromiseRecord,
    PromiseState,
    SettleState,
)
from troth.protocol.requests import PromiseCreateRequest, PromiseSettleRequest
from troth.protocol.subjects import PROMISE_ID, TASK_ID
from troth.sdk.codec import encode_error
from troth.sdk.errors import AttemptInterruptedError
from troth.sdk.execution import Execution

log = logging.getLogger(__name__)

_MAX_RECORDS = 1000  # attempt records a lost attempt looks past for a free number

STOPPED = "its run stopped before it recorded an outcome (its process died or froze)"


def retry_at(record: PromiseRecord) -> int | None:
    value = record.tags.get(RETRY_AT_TAG)
    return int(value) if value is not None and value.isdigit() else None


async def failures(execution: Execution, step_id: str, verify: bool) -> list[PromiseRecord]:
    """The recorded failed attempts of a step, in order; ``verify`` also asks the server
    about the first one the cache does not know."""
    found: list[PromiseRecord] = []
    while True:
        id = attempt_id(step_id, len(found) + 1)
        record = execution.recorded(id)
        if record is None and verify:
            record = await execution.read(id)
        if record is None:
            return found
        if record.state == PromiseState.PENDING:
            # Created, but its process stopped before recording the error: say so.
            lost = AttemptInterruptedError(step_id, len(found) + 1)
            codec = execution.runtime.codec
            record = await execution.settle(id, SettleState.REJECTED, encode_error(codec, lost))
        found.append(record)


def cut_off(failures: list[PromiseRecord]) -> list[PromiseRecord]:
    """The interrupted attempts at the end of ``failures``: the step's current streak of
    lost leases, oldest first."""
    streak: list[PromiseRecord] = []
    for record in reversed(failures):
        if INTERRUPTED_TAG not in record.tags:
            break
        streak.append(record)
    return streak[::-1]


def cause(record: PromiseRecord) -> str:
    """Why an interrupted attempt was cut off, as its record says."""
    return record.tags.get(INTERRUPTED_TAG) or STOPPED


def _attempt(
    execution: Execution, step: PromiseRecord, attempt: int, next_at: int | None, why: str | None
) -> PromiseCreateRequest:
    """The create of ``step``'s record of failed ``attempt``."""
    tags = {
        SCOPE: "local",
        ORIGIN: step.tags.get(ORIGIN, step.id),
        PARENT: step.id,
        BRANCH: step.tags.get(BRANCH, step.id),
        STEP_TAG: "attempt",
        ATTEMPT_TAG: str(attempt),
    }
    if next_at is not None:
        tags[RETRY_AT_TAG] = str(next_at)
    if why is not None:
        tags[INTERRUPTED_TAG] = why
    param = execution.runtime.codec.encode({"attempt": attempt, "retry_at": next_at})
    return PromiseCreateRequest(attempt_id(step.id, attempt), step.timeout_at, param, tags)


async def record_failure(
    execution: Execution,
    step: PromiseRecord,
    attempt: int,
    error: BaseException,
    wait: float,
    interrupted: str | None = None,
) -> PromiseRecord:
    """Record that ``attempt`` of ``step`` failed with ``error`` (was cut off, if
    ``interrupted`` says why) and the next starts in ``wait`` seconds (fenced, like every
    write of the execution)."""
    runtime = execution.runtime
    next_at = runtime.clock.now() + round(wait * 1000)
    request = _attempt(execution, step, attempt, next_at, interrupted)
    await execution.create(request)
    return await execution.settle(
        request.id, SettleState.REJECTED, encode_error(runtime.codec, error)
    )


async def record_lost(execution: Execution, step: PromiseRecord, attempt: int, why: str) -> None:
    """This run's ``attempt`` of ``step`` ran, but its outcome was refused: the lease had
    lapsed and another run holds the task. Say so loudly, and record the attempt as cut
    off, with ``why``, so that the run which took over counts it.

    Unfenced, as it must be (this run holds nothing): a create of the attempt's record,
    idempotent by id, whose only reader is the run that counts attempts."""
    network = execution.runtime.network
    codec = execution.runtime.codec
    log.error(
        "step %s ran, but its outcome was refused: %s; another run holds task %s now and "
        "runs the step again (this attempt counts as interrupted)",
        step.id,
        why,
        execution.task.id,
        extra={PROMISE_ID: step.id, TASK_ID: execution.task.id},
    )
    try:
        # A run that took over before this one's record existed counted one attempt fewer,
        # and its own record of the same number may stand: the next free number is ours.
        for n in range(attempt, attempt + _MAX_RECORDS):
            request = _attempt(execution, step, n, None, why)
            status, body = await network.send(Kind.PROMISE_CREATE, request)
            if status != 200 or body.promise.state == PromiseState.PENDING:
                break
        error = encode_error(codec, AttemptInterruptedError(step.id, n, why))
        settle = PromiseSettleRequest(request.id, SettleState.REJECTED, error)
        await network.send(Kind.PROMISE_SETTLE, settle)
    except Exception as e:  # the next run then counts the attempt itself, without the cause
        log.warning("recording the interrupted attempt of %s failed: %s", step.id, e)
