"""``Context``: what a durable function uses to make durable calls.

Every call (``run``, ``rpc``, ``sleep``, ``promise``, ``detached``, ``now``, ``random``,
``uuid``) takes the next child id the moment it is *called*, not when it is awaited, and
starts at once; it returns a ``DurableFuture`` to await now or later. So
``asyncio.gather(ctx.run(f, 1), ctx.run(f, 2))`` numbers its children in argument order on
every replay, and the ``begin_*`` forms are the same calls under the names other SDKs use
for "start now, await later". A call given an explicit ``id`` takes no number.

One rule keeps replay exact: a context numbers its calls in the order they are made, so
concurrent branches that each make several calls must not share one context (their
interleaving would depend on timing). Make each such branch a durable function of its
own (``ctx.run(branch, ...)``), which gets its own context and its own numbering. Every
call is checked against the record it meets (``troth.sdk.replay``), so a replay that
interleaves differently, or code that changed, is refused rather than answered from
another call's record.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import random as _random
import uuid as _uuid
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import (
    Any,
    Generic,
    NamedTuple,
    ParamSpec,
    TypeVar,
    Unpack,
    cast,
)

import msgspec

from troth.protocol.conventions import CANCELED_TAG, SCOPE, STALLED_HEADER, STEP_TAG
from troth.protocol.ids import child_id, descends
from troth.protocol.ids import origin as origin_of
from troth.protocol.records import (
    BRANCH,
    ORIGIN,
    PARENT,
    TARGET,
    TIMER,
    PromiseRecord,
    PromiseState,
    SettleState,
    Value,
)
from troth.protocol.requests import PromiseCreateRequest
from troth.protocol.subjects import PROMISE_ID, TASK_ID
from troth.sdk import attempts, stalls
from troth.sdk.cancellation import grace_tags
from troth.sdk.codec import encode_error, parameter_hints, result_of
from troth.sdk.errors import (
    AttemptInterruptedError,
    CanceledError,
    ExecutionSignal,
    FunctionNotFoundError,
    LeaseLossesExceeded,
    LeaseLost,
    Suspended,
    UnstorableValueError,
)
from troth.sdk.execution import RUN_TAG, Execution, Runtime
from troth.sdk.network import anycast, target_address
from troth.sdk.options import (
    CallOptions,
    DeadlineSource,
    Options,
    as_timedelta,
    deadline,
    deadline_tags,
    options,
)
from troth.sdk.recording import START_AFTER, Settle, Start
from troth.sdk.registry import function_name, invocation_data, takes_context
from troth.sdk.replay import Call, digest
from troth.sdk.retry import Never, RetryPolicy, default_policy, next_retry
from troth.sdk.saga import Saga
from troth.sdk.signatures import DurableCall
from troth.sdk.stalls import Where

log = logging.getLogger(__name__)

T = TypeVar("T")
P = ParamSpec("P")


class DurableFuture(Generic[T]):
    """A durable call that has started; await it for its value (or its error)."""

    def __init__(
        self,
        execution: Execution,
        id: str,
        task: asyncio.Task[PromiseRecord],
        hint: Any = None,
        wake: tuple[str, ...] = (),
    ) -> None:
        self._execution = execution
        self._task = task
        self._hint = hint
        self._wake = wake  # further promises whose settling must also resume the awaiter
        self.id = id

    def __await__(self) -> Generator[Any, None, T]:
        # Shielded: cancelling one awaiter (a task group unwinding) must not cancel the
        # durable operation, which other awaiters and the execution still wait for.
        record = yield from asyncio.shield(self._task).__await__()
        if record.state == PromiseState.PENDING:
            self._execution.block_on(self.id)
            for id in self._wake:
                self._execution.block_on(id)
            raise Suspended()
        # The value was encoded from the function's T and is decoded back by its hint.
        return cast(T, result_of(record, self._execution.runtime.codec, self._hint))

    def __repr__(self) -> str:
        return f"<DurableFuture {self.id}>"


async def invoke(
    runtime: Runtime,
    fn: Callable[..., Any],
    ctx: Context | None,
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


class Calls:
    """The durable calls that run a function: ``run``, ``rpc``, ``detached`` (and the
    ``begin_*`` names other SDKs use). A ``Context`` makes them with default options;
    ``ctx.options(...)`` returns one that makes them with the options given.

    Everything after the function is the function's own arguments, untouched, and typed by
    its signature: ``ctx.run(charge, "acct", cents=5)`` is checked against ``charge``'s
    parameters, and the future's value has ``charge``'s return type.
    """

    _ctx: Context
    _opts: Options

    @property
    def run(self) -> DurableCall:
        """Run ``fn`` here as a durable step: recorded once, never repeated once finished.

        ``fn`` may be a plain function (``def`` runs in a thread, or in the loop with the
        ``inline`` option; ``async def`` in the loop; retried with ``Exponential()`` by
        default) or a durable function taking a ``Context`` (not retried as a whole by
        default), or a registered function's name.
        """
        return cast(DurableCall, functools.partial(self._ctx._run, self._opts))

    begin_run = run

    @property
    def rpc(self) -> DurableCall:
        """Run ``fn`` on any worker of the ``target`` option's group (default: this app's
        group), as a child execution whose deadline is within this one's.

        The param is ``invocation_data``, the shape every Resonate SDK reads.
        """
        cap = self._ctx.timeout_at
        return cast(DurableCall, functools.partial(self._ctx._call_remote, "rpc", self._opts, cap))

    begin_rpc = rpc

    @property
    def detached(self) -> DurableCall:
        """Start ``fn`` as an execution of its own: its deadline is not capped by this one's
        and nothing here waits for it unless the returned future is awaited."""
        return cast(
            DurableCall, functools.partial(self._ctx._call_remote, "detached", self._opts, None)
        )


class CallsWith(Calls):
    """``ctx.options(...)``: the durable calls of a context, with options."""

    def __init__(self, ctx: Context, opts: Options) -> None:
        self._ctx = ctx
        self._opts = opts


class Shield:
    """``async with ctx.shield():`` — durable calls made inside are not stopped by a
    cancellation, whenever it comes: a cleanup's steps run and are recorded."""

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx

    async def __aenter__(self) -> None:
        self._ctx._shields += 1

    async def __aexit__(self, *exc: object) -> None:
        self._ctx._shields -= 1


class Context(Calls):
    def __init__(
        self,
        execution: Execution,
        id: str,
        origin: str,
        branch: str,
        timeout_at: int,
        *,
        attempt: int = 1,
        shielded: bool = False,
        start: Start | None = None,
    ) -> None:
        self._execution = execution
        self._seq = 0
        self.id = id
        self.origin = origin
        self.branch = branch
        self.timeout_at = timeout_at
        self.attempt = attempt  # of the function this context runs (1, then its retries)
        self._ctx = self
        self._opts = Options()
        self._inherited_shield = shielded  # a durable function run from inside a shield
        self._shields = 0
        # A durable step that runs before it is recorded: recorded before its first child,
        # so that no record's parent is missing (``troth.sdk.recording``).
        self._unrecorded = start

    def options(self, **given: Unpack[CallOptions]) -> CallsWith:
        """The durable calls (``run``, ``rpc``, ``detached``) made with these options (see
        ``troth.sdk.options.Options``): ``ctx.options(timeout=30).run(fetch, url)``."""
        return CallsWith(self, options(**given))

    # -- cancellation and compensation ---------------------------------------------------

    @property
    def shielded(self) -> bool:
        """True inside ``ctx.shield()`` (or in a durable function run from inside one)."""
        return self._inherited_shield or self._shields > 0

    @property
    def cancel_requested(self) -> bool:
        """True once this execution was asked to stop (its durable calls outside a shield
        raise ``CanceledError`` from then on).

        Not recorded: a replay may see it earlier than the first run did. Use it to cut
        short work that makes no durable call (a long computation), never to choose which
        durable call to make, or the replay is refused as non-deterministic."""
        return self._execution.cancellation is not None

    def shield(self) -> Shield:
        """A scope whose durable calls a cancellation does not stop, for cleanup::

        try:
            await ctx.sleep(3600)
        except CanceledError:
            async with ctx.shield():
                await ctx.run(release, order)
            raise
        """
        return Shield(self)

    def saga(self, *, parallel: bool = False) -> Saga:
        """Compensations for the steps of a block (see ``troth.sdk.saga``)::

        async with ctx.saga() as saga:
            r = await ctx.run(reserve, order)
            saga.on_failure(release, r)
        """
        return Saga(self, parallel)

    # -- local steps ------------------------------------------------------------------------

    def _run(
        self, opts: Options, fn: Callable[..., Any] | str, /, *args: Any, **kwargs: Any
    ) -> DurableFuture[Any]:
        self._guard()
        registry = self._execution.runtime.registry
        entry = registry.get(fn, opts.version) if isinstance(fn, str) else registry.of(fn)
        if isinstance(fn, str) and entry is None:
            raise FunctionNotFoundError(fn, opts.version)
        func = entry.fn if entry else fn
        assert callable(func)
        name = entry.name if entry else function_name(func)
        durable = entry.durable if entry else takes_context(func)
        policy = opts.retry or (entry.retry if entry else None)
        policy = policy or default_policy(durable)
        timeouts = [
            (opts.timeout, DeadlineSource.OPTION),
            (entry.timeout if entry else None, DeadlineSource.REGISTER),
        ]
        if opts.grace is not None:
            raise ValueError(
                "the grace option applies to executions (ctx.rpc, ctx.detached, app.run, "
                "app.rpc), not to a step run in this execution"
            )
        step = Step(
            id=self._next(opts.id),
            call=Call("run", name, digest(args, kwargs)),
            fn=func,
            shielded=self.shielded,
            args=args,
            kwargs=kwargs,
            durable=durable,
            inline=opts.inline if opts.inline is not None else bool(entry and entry.inline),
            policy=policy,
            opts=opts,
            timeouts=timeouts,
        )
        return self._step(step, parameter_hints(func)[1])

    def now(self) -> DurableFuture[datetime]:
        """The current time, recorded on first run so a replay sees the same instant."""
        clock = self._execution.runtime.clock
        return self._value("now", lambda: clock.now() / 1000, datetime)

    def random(self) -> DurableFuture[float]:
        """A random number in [0, 1), recorded on first run so a replay sees the same one."""
        return self._value("random", _random.random, float)

    def uuid(self) -> DurableFuture[_uuid.UUID]:
        """A random UUID, recorded on first run so a replay sees the same one."""
        return self._value("uuid", lambda: str(_uuid.uuid4()), _uuid.UUID)

    def _value(self, kind: str, make: Callable[[], Any], hint: Any) -> DurableFuture[Any]:
        """A value made once and recorded: a step of its own kind, so that a replay whose
        code no longer makes it (or makes it elsewhere) is refused, not shifted."""
        self._guard()
        step = Step(id=self._next(None), call=Call(kind), fn=make, shielded=self.shielded)
        return self._step(step, hint)

    def _step(self, step: Step, hint: Any) -> DurableFuture[Any]:
        """Start a local step now; its future decodes the value by ``hint``."""
        task = self._execution.spawn(self._local(step), step=True)
        return DurableFuture(self._execution, step.id, task, hint)

    async def _recorded(self) -> None:
        """This context's own promise exists before any of its children is written."""
        if self._unrecorded is not None:
            await self._unrecorded.send()

    async def _local(self, step: Step) -> PromiseRecord:
        execution = self._execution
        await self._recorded()
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
            return await self._refuse(record)
        attempted = await self._attempts(record, step)
        settle = functools.partial(execution.settle, id)
        return await self._outcome(settle, step, record, attempted)

    def _start(self, step: Step) -> PromiseCreateRequest:
        """The create that records that ``step`` started, now, in this run."""
        execution = self._execution
        tags = self._tags(step.id, "local", step.call, own_branch=False)
        tags[RUN_TAG] = execution.run_id
        tags.update(step.opts.tags)
        if execution.canceled(step.shielded) is not None:
            tags[CANCELED_TAG] = "true"  # refused, in this run and every replay
        param = execution.runtime.codec.encode({"func": step.call.name or step.call.kind})
        now = execution.runtime.clock.now()
        at, source = deadline(now, step.timeouts, self.timeout_at)
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
                return Attempted(*self._canceled(), attempt)
        where = Where(execution.root.id, record.id, step.call.name or step.call.kind)
        while True:
            if signal := execution.lost():
                raise signal
            try:
                child = None
                if step.durable:
                    child = Context(
                        execution,
                        record.id,
                        self.origin,
                        self.branch,
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
                canceled = encode_error(runtime.codec, error)
                return Attempted(SettleState.REJECTED_CANCELED, canceled, attempt)
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
                return Attempted(*self._canceled(), attempt)
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

    def _canceled(self) -> tuple[SettleState, Value]:
        """A step given up because its execution was canceled (between attempts)."""
        execution = self._execution
        error = execution.canceled(False) or CanceledError(execution.root.id)
        return SettleState.REJECTED_CANCELED, encode_error(execution.runtime.codec, error)

    async def _refuse(self, record: PromiseRecord) -> PromiseRecord:
        """Settle a call's pending record as canceled: it raises ``CanceledError``."""
        state, value = self._canceled()
        return await self._execution.settle(record.id, state, value)

    def _retry(
        self, step: Step, attempt: int, error: Exception, record: PromiseRecord
    ) -> float | None:
        if isinstance(error, UnstorableValueError):
            return None  # the same value fails the same way on every attempt
        now = self._execution.runtime.clock.now()
        return next_retry(
            step.policy, attempt, error, step.opts.non_retryable, now, record.timeout_at
        )

    # -- remote calls and promises ----------------------------------------------------------

    def _call_remote(
        self,
        kind: str,
        opts: Options,
        cap: int | None,
        fn: Callable[..., Any] | str,
        /,
        *args: Any,
        **kwargs: Any,
    ) -> DurableFuture[Any]:
        """A child promise targeted at another worker; ``cap`` bounds its deadline."""
        self._guard()
        name, version, hint, registered = self._remote(fn, opts)
        codec = self._execution.runtime.codec
        param = codec.encode(invocation_data(name, version, args, kwargs))
        id = self._next(opts.id)
        target = target_address(opts.target) if opts.target else anycast(self._group())
        # Even a detached child keeps this tree's origin (ids below a root share it); every
        # remote child starts a branch of its own.
        call = Call(kind, name, digest(args, kwargs))
        tags = {**self._tags(id, "global", call), TARGET: target, **opts.tags}
        runtime = self._execution.runtime
        choices = [
            (opts.timeout, DeadlineSource.OPTION),
            (registered, DeadlineSource.REGISTER),
            (runtime.default_timeout, DeadlineSource.APP),
        ]
        at, source = deadline(runtime.clock.now(), choices, cap)
        tags.update(deadline_tags(source))
        tags.update(grace_tags(opts, at, source))
        request = PromiseCreateRequest(id, at, param, tags)
        return self._child(id, call, request, hint)

    def sleep(
        self, duration: timedelta | float | None = None, *, until: datetime | None = None
    ) -> DurableFuture[None]:
        """A durable timer: survives restarts, and a replay past it does not wait again."""
        self._guard()
        now = self._execution.runtime.clock.now()
        if until is not None:
            wake = round(until.timestamp() * 1000)
        else:
            seconds = duration.total_seconds() if isinstance(duration, timedelta) else duration
            wake = now + round((seconds or 0) * 1000)
        id = self._next(None)
        call = Call("sleep")
        tags = {**self._tags(id, "global", call), TIMER: "true"}
        request = PromiseCreateRequest(id, min(wake, self.timeout_at), Value(), tags)
        return self._child(id, call, request, None)

    def promise(
        self,
        *,
        timeout: timedelta | float | None = None,
        id: str | None = None,
        data: Any = None,
        tags: dict[str, str] | None = None,
    ) -> DurableFuture[Any]:
        """A promise that something outside settles (``app.promises.resolve(p.id, ...)``).

        An explicit ``id`` is the name whoever settles it uses; it may lie inside this
        execution's tree (``f"{ctx.id}:approval"``) or anywhere else, and takes no
        position among this context's calls.
        """
        self._guard()
        codec = self._execution.runtime.codec
        param = codec.encode(data) if data is not None else Value()
        promise_id = self._next(id)
        call = Call("promise", None, digest(data) if data is not None else None)
        all_tags = {**self._tags(promise_id, "global", call), **(tags or {})}
        now = self._execution.runtime.clock.now()
        choice = [(as_timedelta(timeout), DeadlineSource.OPTION)]
        at, source = deadline(now, choice, self.timeout_at)
        all_tags.update(deadline_tags(source))
        request = PromiseCreateRequest(promise_id, at, param, all_tags)
        return self._child(promise_id, call, request, None, deadline_timer=True)

    def _child(
        self,
        id: str,
        call: Call,
        request: PromiseCreateRequest,
        hint: Any,
        deadline_timer: bool = False,
    ) -> DurableFuture[Any]:
        """A child promise created (or found) at once; ``deadline_timer`` adds a timer at
        its deadline, for promises the server does not time out on its own (see below)."""
        execution = self._execution
        timer_id = child_id(id, "deadline")
        shielded = self.shielded

        async def create() -> PromiseRecord:
            await self._recorded()
            record = execution.recorded(id)
            if record is None:
                refused = execution.canceled(shielded) is not None
                made = _refused(request, self.timeout_at) if refused else request
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
                record = await self._pending(record, call.kind, shielded)
            if deadline_timer and record.state == PromiseState.PENDING:
                # A promise without a target is not swept at its deadline (Lean arms promise
                # timeouts only for targeted and timer promises), so nothing would resume an
                # execution awaiting it. A timer at the same instant, awaited alongside,
                # resumes it; the replay then reads the promise as timed out.
                tags = {**self._tags(timer_id, "global"), TIMER: "true"}
                timer = PromiseCreateRequest(timer_id, record.timeout_at, Value(), tags)
                if execution.recorded(timer_id) is None:
                    await execution.create(timer)
            return record

        wake = (timer_id,) if deadline_timer else ()
        return DurableFuture(execution, id, execution.spawn(create()), hint, wake)

    async def _pending(self, record: PromiseRecord, kind: str, shielded: bool) -> PromiseRecord:
        """What a canceled execution does with a pending child promise: a refused call's
        record and its own sleep or promise are settled canceled (the await raises); a
        remote child is asked to stop in turn, and awaited for its outcome."""
        execution = self._execution
        if CANCELED_TAG in record.tags:
            return await self._refuse(record)
        if kind in ("sleep", "promise"):
            ours = descends(record.id, execution.root.id)
            if ours and execution.canceled(shielded) is not None:
                return await self._refuse(record)
        elif kind in ("rpc", "detached"):
            execution.track_remote(record, kind == "detached", shielded)
        return record

    # -- helpers ----------------------------------------------------------------------------

    def _guard(self) -> None:
        signal = self._execution.refuse()
        if signal is not None:
            raise signal

    def _next(self, explicit: str | None) -> str:
        """The id of the next call: its position among this context's calls, unless the
        caller named the promise (then it takes no position, so adding or removing such a
        call shifts no other call's id)."""
        if explicit is not None:
            return explicit
        id = child_id(self.id, str(self._seq))
        self._seq += 1
        return id

    def _finish(self) -> None:
        """Refuse a replay that ended before the history did: a call recorded past the
        last one the code made now means a call was removed (or moved later)."""
        execution = self._execution
        next_id = child_id(self.id, str(self._seq))
        record = execution.recorded(next_id)
        if record is not None and STEP_TAG in record.tags:
            execution.refuse_history(
                next_id,
                f"the code now ends after {self._seq} calls but the history records "
                f"{record.tags[STEP_TAG]!r} as call {self._seq}",
            )

    def _group(self) -> str:
        return self._execution.runtime.network.group

    def _tags(
        self, id: str, scope: str, call: Call | None = None, own_branch: bool = True
    ) -> dict[str, str]:
        """The tags of a child promise: its scope, its lineage, and the call that made it
        (for the replay check). Only a local step stays on this context's branch; an
        explicit id outside this execution's tree starts a lineage of its own, rooted where
        the id's own origin is (the server requires ids to extend the origin, parent and
        branch tags, and an origin to be a root id: ``x.approval:deadline`` is in
        ``x.approval``'s tree)."""
        return {
            SCOPE: scope,
            ORIGIN: self.origin if descends(id, self.origin) else origin_of(id),
            PARENT: self.id if descends(id, self.id) else id,
            BRANCH: id if own_branch or not descends(id, self.branch) else self.branch,
            **(call.tags() if call is not None else {}),
        }

    def _remote(
        self, fn: Callable[..., Any] | str, opts: Options
    ) -> tuple[str, int | None, Any, timedelta | None]:
        """The name, pinned version, return hint and registered timeout of a function run
        elsewhere (the timeout when this app registers it too)."""
        registry = self._execution.runtime.registry
        if isinstance(fn, str):
            entry = registry.get(fn, opts.version)
            return fn, opts.version, None, entry.timeout if entry else None
        entry = registry.of(fn)
        name = entry.name if entry else function_name(fn)
        version = opts.version or (entry.version if entry else None)
        return name, version, parameter_hints(fn)[1], entry.timeout if entry else None


def _refused(request: PromiseCreateRequest, deadline: int) -> PromiseCreateRequest:
    """The record of a call refused because its execution was canceled: its own tags, so
    the replay check knows it, but no target (nothing is to run it) and no timer, with the
    execution's ``deadline`` (a sleep's wake may be past already: the promise would read as
    resolved, or timed out, before it is settled canceled)."""
    tags = {k: v for k, v in request.tags.items() if k not in (TARGET, TIMER)}
    tags[CANCELED_TAG] = "true"
    return msgspec.structs.replace(request, tags=tags, timeout_at=deadline)
