"""Recording a local step after it ran: one request where the standard path sends two.

The standard path creates a step's promise before the step runs (``promise.create``, with
this run's ``troth:run`` tag) and settles it after: two fenced requests, two commits. A
step that certainly does not exist yet (``troth.sdk.known``) runs first, and its create is
sent with its settle as one ``task.fences`` [create, settle], exactly the create the
standard path would have sent (its deadline computed when the step started) followed by
the settle: the same rows as the two standard requests sent back to back when it ended.
The lease rule is unchanged: the run checks its lease before each attempt, and the fence
checks the task's version in the same transaction that writes.

A step's start is still recorded alone, before its end, when it must be seen pending:

- it runs longer than ``START_AFTER`` (an operator sees it in the console; a run that dies
  in it leaves it pending, and the next run counts the attempt as interrupted);
- an attempt failed and will be retried (the failure is recorded below the step, with the
  instant the next attempt starts, as on the standard path).

The window this leaves: a step that kills its worker within ``START_AFTER`` leaves no
record, so the next run runs it as a first attempt rather than counting an interrupted
one (each such crash still costs a lease expiry, and raises the task's version).

If the knowledge was wrong and the create meets a promise that exists, the recorded one
stands (never the value just computed), and it is said loudly: at ERROR when it was
settled already (the step ran twice), at WARNING when an earlier run left it pending (its
attempt was not counted).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from troth.protocol.kinds import Kind
from troth.protocol.records import PromiseRecord, PromiseState, SettleState, Value
from troth.protocol.requests import FenceAction, PromiseCreateRequest, PromiseSettleRequest
from troth.protocol.subjects import PROMISE_ID, TASK_ID
from troth.sdk.execution import RUN_TAG, Execution
from troth.sdk.network import action_head

log = logging.getLogger(__name__)

START_AFTER = 0.25
"""Seconds a step runs unrecorded before its start is recorded on its own. Short enough
that a step long enough to be watched (or to be killed in by hand) shows as pending, and
that the crash window above is small; long enough that a step of ordinary cost (a local
computation, a call to a fast service) is recorded with one request."""

Settle = Callable[[SettleState, Value], Awaitable[PromiseRecord]]


class Start:
    """The create of a step that runs before it is recorded: sent at most once, alone
    (``send``) or with the settle (``settle``)."""

    def __init__(self, execution: Execution, request: PromiseCreateRequest) -> None:
        self._execution = execution
        self._request = request
        self._sent: asyncio.Task[PromiseRecord] | None = None

    def provisional(self) -> PromiseRecord:
        """The record the create will make, for the attempts to run against meanwhile."""
        r = self._request
        now = self._execution.runtime.clock.now()
        return PromiseRecord(
            r.id, PromiseState.PENDING, r.param, Value(), r.tags, r.timeout_at, now
        )

    def send(self) -> asyncio.Task[PromiseRecord]:
        """The create, sent now alone unless it was already."""
        if self._sent is None:
            self._sent = self._execution.spawn(self._create())
        return self._sent

    async def after(self, seconds: float) -> None:
        """Send the create alone once the step has run ``seconds``."""
        await self._execution.runtime.clock.sleep(seconds)
        self.send()  # not awaited: cancelling this must not cancel the create

    async def settle(self, state: SettleState, value: Value) -> PromiseRecord:
        """Record the step's outcome, with its create unless that was sent alone."""
        execution = self._execution
        settle = PromiseSettleRequest(self._request.id, state, value)
        if self._sent is not None:
            await self._sent
            return await execution.settle(settle.id, state, value)
        created, settled = await execution.fences(
            [
                FenceAction(Kind.PROMISE_CREATE, self._request, action_head()),
                FenceAction(Kind.PROMISE_SETTLE, settle, action_head()),
            ]
        )
        self._check(created)
        return settled  # a step settled before is answered as it was: the recorded outcome

    async def _create(self) -> PromiseRecord:
        created = await self._execution.create(self._request)
        self._check(created)
        return created

    def _check(self, created: PromiseRecord) -> None:
        """Say so if the create met a promise that was there before it."""
        sent = self._request
        if created.tags.get(RUN_TAG) == sent.tags[RUN_TAG] and created.param == sent.param:
            return  # this run's own (settled at once when born past its deadline)
        extra = {PROMISE_ID: sent.id, TASK_ID: self._execution.task.id}
        if created.state != PromiseState.PENDING:
            log.error(
                "step %s ran, but it had already been recorded (by run %s): it ran twice, "
                "a bug in troth's knowledge of the branch; its recorded outcome stands",
                sent.id,
                created.tags.get(RUN_TAG),
                extra=extra,
            )
        else:
            log.warning(
                "step %s was pending from an earlier run (%s), which this run did not "
                "know: that run's attempt of it was not counted",
                sent.id,
                created.tags.get(RUN_TAG),
                extra=extra,
            )
