"""The local-step driver: a step run here, retried by its policy, and recorded once.

``Steps.run`` takes a step (``ctx.run`` of a function, or a recorded value: ``now``,
``random``, ``uuid``) from its record to its outcome: a settled record answers the call;
otherwise the step runs, perhaps before it is recorded (``troth.sdk.recording``), attempt
after attempt by its retry policy, its failures recorded below it so the count survives
crashes (``troth.sdk.attempts``), a streak of lost leases halting the task, and its code
timed on the event loop (``troth.sdk.stalls``). ``invoke`` calls the function itself, for
a step and for an execution's root alike (``troth.sdk.worker``).

It sees the context it serves only as its ``Frame``. A durable step needs a ``Context`` of
its own: the driver is given the constructor (``Contexts``, ``Context`` itself), so that it
need not import the call surface that imports it.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, NamedTuple, Protocol

from troth.protocol.conventions import CANCELED_TAG, STALLED_HEADER
from troth.protocol.ids import descends
from troth.protocol.records import BRANCH, ORIGIN, PromiseRecord, PromiseState, SettleState, Value
from troth.protocol.requests import PromiseCreateRequest
from troth.protocol.subjects import PROMISE_ID, TASK_ID
from troth.sdk import attempts, stalls
from troth.sdk.children import canceled, refuse
from troth.sdk.codec import encode_error
from troth.sdk.errors import (
    AttemptInterruptedError,
    CanceledError,
    ExecutionSignal,
    LeaseLossesExceeded,
    LeaseLost,
    UnstorableValueError,
)
from troth.sdk.execution import RUN_TAG, Execution, Runtime
from troth.sdk.frames import Frame
from troth.sdk.options import DeadlineSource, Options, deadline, deadline_tags
from troth.sdk.recording import START_AFTER, Settle, Start
from troth.sdk.replay import Call
from troth.sdk.retry import Never, RetryPolicy, next_retry
from troth.sdk.stalls import Where

log = logging.getLogger(__name__)


class Durable(Protocol):
    """A durable function's context (a ``Context``), as the driver uses it: checked, once
    the function returns, against a history that goes on past its last call."""

    def _finish(self) -> None: ...


class Contexts(Protocol):
    """How the driver makes a durable step's context: ``Context`` itself."""

    def __call__(
        self,
        execution: Execution,
        id: str,
        origin: str,
        branch: str,
        timeout_at: int,
        *,
        attempt: int,
        shielded: bool,
        start: Start | None,
    ) -> Durable: ...


async def invoke(
    runtime: Runtime,
    fn: Callable[..., Any],
    ctx: Durable | None,
    args: tuple[Any, ...] | list[Any],
    kwargs: dict[str, Any],
    where: Where,
    inline: bool = False,
) -> Any:
    """Call a durable function with ``ctx``, or a plain one without: ``async def`` in the
    loop, ``def`` in a worker thread so a long step cannot hold up the loop (or, when
    ``inline``, in the loop too: the ``inline`` option). What runs on the loop is timed as
    ``where``'s code (``troth.sdk.stalls``)."""
    stalls = runtime.stalls
    if ctx is not None:
        result = stalls.call(fn, where, ctx, *args, **kwargs)
        if inspect.iscoroutine(result):
            result = await stalls.timed(result, where)
        elif inspect.isawaitable(result):
            result = await result
        ctx._finish()
        return result
    runtime.active_steps += 1
    try:
        if inspect.iscoroutinefunction(fn):
            return await stalls.timed(fn(*args, **kwargs), where)
        if inline:
            result = stalls.call(fn, where, *args, **kwargs)
        else:
            result = await asyncio.to_thread(fn, *args, **kwargs)
        return await result if inspect.isawaitable(result) else result
    finally:
        runtime.active_steps -= 1


class Attempted(NamedTuple):
    """How a step's attempts ended: the outcome to record, and the attempt that made it."""

    state: SettleState
    value: Value
    attempt: int


@dataclass(frozen=True)
class Step:
    """A local step as the code calls it now: its promise, what it runs, how it retries.

    The defaults are those of a recorded value (``ctx.now()``, ``random``, ``uuid``)."""

    id: str
    call: Call
    fn: Callable[..., Any]
    shielded: bool  # made inside ``ctx.shield()``: a cancellation does not stop it
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    durable: bool = False  # ``fn`` takes a ``Context``
    inline: bool = False  # a plain ``def`` runs on the loop (the ``inline`` option)
    policy: RetryPolicy = field(default_factory=Never)
    opts: Options = field(default_factory=Options)
    timeouts: list[tuple[timedelta | None, DeadlineSource]] = field(default_factory=list)
    """The step's deadline choices, in order of precedence."""

    @property
    def reruns(self) -> bool:
        """Whether running it again repeats its work: a plain function's run is a new
        attempt; a durable function's replay is not, and a value (now, random, uuid) is
        simply made again."""
        return self.call.kind == "run" and not self.durable


class Steps:
    """The local steps of one context, made through its ``frame``; ``contexts`` makes the
    context of a durable step."""

    def __init__(self, frame: Frame, contexts: Contexts) -> None:
        self._frame = frame
        self._execution = frame.execution
        self._contexts = contexts

    async def run(self, step: Step) -> PromiseRecord:
        """Run ``step`` to its outcome (or answer it from its record): what it recorded."""
        execution = self._execution
        await self._frame.recorded()
        id = step.id
        record = execution.recorded(id)
        if record is None:
            request = self._start(step)
            if await self._fresh(step, request):
                return await self._run_fresh(step, request)
            record = await execution.create(request)
        execution.check(record, step.call)
        if record.state != PromiseState.PENDING:
            execution.runtime.tracing.replayed(record)
            execution.runtime.metrics.replayed(execution)
            return record
        if CANCELED_TAG in record.tags:
            return await refuse(execution, record)
        attempted = await self._attempts(record, step)
        settle = functools.partial(execution.settle, id)
        return await self._outcome(settle, step, record, attempted)

    def _start(self, step: Step) -> PromiseCreateRequest:
        """The create that records that ``step`` started, now, in this run."""
        execution = self._execution
        tags = self._frame.tags(step.id, "local", step.call, own_branch=False)
        tags[RUN_TAG] = execution.run_id
        tags.update(step.opts.tags)
        if execution.canceled(step.shielded) is not None:
            tags[CANCELED_TAG] = "true"  # refused, in this run and every replay
        param = execution.runtime.codec.encode({"func": step.call.name or step.call.kind})
        now = execution.runtime.clock.now()
        at, source = deadline(now, step.timeouts, self._frame.timeout_at)
        tags.update(deadline_tags(source))
        return PromiseCreateRequest(step.id, at, param, tags)

    async def _fresh(self, step: Step, request: PromiseCreateRequest) -> bool:
        """Whether ``step`` may run before it is recorded (``troth.sdk.recording``): not
        refused, within its deadline, under this execution, and certainly not created yet."""
        execution = self._execution
        if (
            CANCELED_TAG in request.tags
            or not descends(step.id, execution.root.id)  # an explicit id: anyone's
            or request.timeout_at <= execution.runtime.clock.now()  # born timed out: not run
        ):
            return False
        origin, branch = request.tags[ORIGIN], request.tags[BRANCH]
        return await execution.known.absent(execution.runtime.network, origin, branch, step.id)

    async def _run_fresh(self, step: Step, request: PromiseCreateRequest) -> PromiseRecord:
        """Run a step that does not exist yet, and record it after: its create and settle in
        one request, unless it had to be seen pending before (``recording.Start``)."""
        execution = self._execution
        start = Start(execution, request)
        announce = execution.spawn(start.after(START_AFTER))
        provisional = start.provisional()
        try:
            attempted = await self._attempts(provisional, step, start)
        finally:
            announce.cancel()
        record = await self._outcome(start.settle, step, provisional, attempted)
        execution.check(record, step.call)
        return record

    async def _record(self, settle: Settle, state: SettleState, value: Value) -> PromiseRecord:
        """Record a step's outcome with ``settle``; a value the server refuses as too large
        (413) rejects the step instead. What the store recorded."""
        try:
            return await settle(state, value)
        except UnstorableValueError as error:
            rejected = encode_error(self._execution.runtime.codec, error)
            return await settle(SettleState.REJECTED, rejected)

    async def _attempts(
        self, record: PromiseRecord, step: Step, start: Start | None = None
    ) -> Attempted:
        """Run attempts of a pending step until one succeeds or the policy gives up;
        ``start`` is the create of a step not recorded yet (then ``record`` is provisional).

        The count survives crashes (``troth.sdk.attempts``): a step that an earlier run
        started resumes at the attempt after the failures it recorded, and for a plain
        function the attempt that run was making counts as made and interrupted. A streak
        of ``max_lease_losses`` interrupted attempts halts the task instead.
        """
        execution = self._execution
        runtime = execution.runtime
        fresh = record.tags.get(RUN_TAG) == execution.run_id
        failures = await attempts.failures(execution, record.id, verify=not fresh)
        attempt = len(failures) + 1
        resume_at = attempts.retry_at(failures[-1]) if failures else None
        cut_off = attempts.cut_off(failures)
        if (
            not fresh
            and step.reruns
            and (not failures or (resume_at is not None and resume_at <= runtime.clock.now()))
        ):
            # The earlier run was making this attempt (or may have been) when it stopped.
            self._halt_on_losses(step, record, [*cut_off, None])
            error: Exception = AttemptInterruptedError(record.id, attempt, attempts.STOPPED)
            wait = self._retry(step, attempt, error, record)
            if wait is None:
                return Attempted(SettleState.REJECTED, encode_error(runtime.codec, error), attempt)
            await attempts.record_failure(
                execution, record, attempt, error, wait, interrupted=attempts.STOPPED
            )
            resume_at = runtime.clock.now() + round(wait * 1000)
            attempt += 1
        elif cut_off and resume_at is None and step.reruns:
            # The run that made the last attempt lost its lease and recorded why: the policy
            # decides on another attempt now.
            self._halt_on_losses(step, record, cut_off)
            error = AttemptInterruptedError(record.id, attempt - 1, attempts.cause(cut_off[-1]))
            wait = self._retry(step, attempt - 1, error, record)
            if wait is None:
                return Attempted(SettleState.REJECTED, encode_error(runtime.codec, error), attempt)
            resume_at = runtime.clock.now() + round(wait * 1000)
        if resume_at is not None:
            wait = max(0.0, (resume_at - runtime.clock.now()) / 1000)
            if await execution.pause(wait, cancelable=not step.shielded):
                return Attempted(*canceled(execution), attempt)
        where = Where(execution.root.id, record.id, step.call.name or step.call.kind)
        while True:
            if signal := execution.lost():
                raise signal
            try:
                child = None
                if step.durable:
                    child = self._contexts(
                        execution,
                        record.id,
                        self._frame.origin,
                        self._frame.branch,
                        record.timeout_at,
                        attempt=attempt,
                        shielded=step.shielded,
                        start=start,
                    )
                with (
                    runtime.tracing.step(record.id, step.call.step, attempt),
                    runtime.metrics.step(step.call.step),
                ):
                    result = await invoke(
                        runtime, step.fn, child, step.args, step.kwargs, where, step.inline
                    )
                value = self._stalled(where, runtime.codec.encode(result))
                return Attempted(SettleState.RESOLVED, value, attempt)
            except ExecutionSignal:
                raise
            except Exception as e:
                error = e
            if isinstance(error, CanceledError):  # never retried: it ends as canceled
                stopped = encode_error(runtime.codec, error)
                return Attempted(SettleState.REJECTED_CANCELED, stopped, attempt)
            wait = self._retry(step, attempt, error, record)
            if wait is None:
                rejected = self._stalled(where, encode_error(runtime.codec, error))
                return Attempted(SettleState.REJECTED, rejected, attempt)
            runtime.metrics.retried(step.call.step)
            log.warning(
                "step %s failed (attempt %d: %r); retrying in %.3g s",
                record.id,
                attempt,
                error,
                wait,
                extra={PROMISE_ID: record.id, TASK_ID: execution.task.id},
            )
            if start is not None:
                record = await start.send()  # its failures are recorded below it
            await attempts.record_failure(execution, record, attempt, error, wait)
            if await execution.pause(wait, cancelable=not step.shielded):
                return Attempted(*canceled(execution), attempt)
            attempt += 1

    def _halt_on_losses(
        self, step: Step, record: PromiseRecord, streak: Sequence[PromiseRecord | None]
    ) -> None:
        """Halt the task if ``streak`` (the step's interrupted attempts in a row, None for
        one found just now) has reached ``Troth(max_lease_losses=...)``."""
        bound = self._execution.runtime.max_lease_losses
        if bound is None or len(streak) < bound:
            return
        causes = [attempts.STOPPED if r is None else attempts.cause(r) for r in streak]
        name = step.call.name or step.call.kind
        raise LeaseLossesExceeded(self._execution.root.id, record.id, name, causes)

    async def _outcome(
        self, settle: Settle, step: Step, record: PromiseRecord, attempted: Attempted
    ) -> PromiseRecord:
        """Record an attempt's outcome (``_record``); if it is refused because this run lost
        the task's lease, an attempt that will run again is recorded as cut off, with why,
        before the run stops."""
        try:
            return await self._record(settle, attempted.state, attempted.value)
        except LeaseLost:
            if not step.reruns:
                raise
            execution = self._execution
            stalled = (attempted.value.headers or {}).get(STALLED_HEADER)
            ttl = execution.runtime.leases.ttl_ms / 1000
            if stalled is not None:
                why = f"blocked the event loop {int(stalled) / 1000:.1f} s, lease {ttl:g} s"
            else:
                why = f"its lease ({ttl:g} s) lapsed before its outcome was recorded"
            await attempts.record_lost(execution, record, attempted.attempt, why)
            raise

    def _stalled(self, where: Where, value: Value) -> Value:
        """A step's outcome, with how long its code blocked the event loop if it did."""
        return stalls.mark(value, self._execution.runtime.stalls.stalled_ms(where))

    def _retry(
        self, step: Step, attempt: int, error: Exception, record: PromiseRecord
    ) -> float | None:
        if isinstance(error, UnstorableValueError):
            return None  # the same value fails the same way on every attempt
        now = self._execution.runtime.clock.now()
        return next_retry(
            step.policy, attempt, error, step.opts.non_retryable, now, record.timeout_at
        )
