"""Durable attempt counts: each failed attempt of a step is a record of its own.

A retry policy's bound must hold across crashes (four attempts means four, whatever is
killed when), and an operator must see why a step is still pending. So when an attempt
fails and the policy allows another, the failure is recorded before the wait, as a child
promise of the step: ``<step>.attempt<n>``, rejected with the attempt's error, tagged with
its number and the instant the next attempt starts. A run that resumes a pending step
counts these records to know which attempt comes next and how long to wait for it.

The last attempt's error is the step's own rejection, so it is not recorded twice. The
records share the step's branch, so the server's preload carries them to a resuming worker
and counting them costs no request; a step started by another run is counted against the
server as well (one ``promise.get`` past the last record), since a cache is no proof of
absence.
"""

from __future__ import annotations

from troth.protocol.conventions import ATTEMPT_TAG, RETRY_AT_TAG, SCOPE, STEP_TAG, attempt_id
from troth.protocol.records import (
    BRANCH,
    ORIGIN,
    PARENT,
    PromiseRecord,
    PromiseState,
    SettleState,
)
from troth.protocol.requests import PromiseCreateRequest
from troth.sdk.codec import encode_error
from troth.sdk.errors import AttemptInterruptedError
from troth.sdk.execution import Execution


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


async def record_failure(
    execution: Execution, step: PromiseRecord, attempt: int, error: BaseException, wait: float
) -> None:
    """Record that ``attempt`` of ``step`` failed with ``error`` and the next starts in
    ``wait`` seconds (fenced, like every write of the execution)."""
    runtime = execution.runtime
    id = attempt_id(step.id, attempt)
    next_at = runtime.clock.now() + round(wait * 1000)
    tags = {
        SCOPE: "local",
        ORIGIN: step.tags.get(ORIGIN, step.id),
        PARENT: step.id,
        BRANCH: step.tags.get(BRANCH, step.id),
        STEP_TAG: "attempt",
        ATTEMPT_TAG: str(attempt),
        RETRY_AT_TAG: str(next_at),
    }
    param = runtime.codec.encode({"attempt": attempt, "retry_at": next_at})
    await execution.create(PromiseCreateRequest(id, step.timeout_at, param, tags))
    await execution.settle(id, SettleState.REJECTED, encode_error(runtime.codec, error))
