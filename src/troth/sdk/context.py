"""``Context``: what a durable function uses to make durable calls.

Every call (``run``, ``rpc``, ``sleep``, ``promise``, ``detached``, ``now``) takes the next
child id the moment it is *called*, not when it is awaited, and starts at once; it
returns a ``DurableFuture`` to await now or later. So ``asyncio.gather(ctx.run(f, 1),
ctx.run(f, 2))`` numbers its children in argument order on every replay, and the
``begin_*`` forms are the same calls under the names other SDKs use for "start now, await
later".

One rule keeps replay exact: a context numbers its calls in the order they are made, so
concurrent branches that each make several calls must not share one context (their
interleaving would depend on timing). Make each such branch a durable function of its
own (``ctx.run(branch, ...)``), which gets its own context and its own numbering; the
determinism check reports the mistake when it happens.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import logging
import random as _random
import uuid as _uuid
from collections.abc import Callable, Generator
from datetime import datetime, timedelta
from typing import Any, Generic, TypeVar

from troth.protocol.ids import child_id, descends
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
from troth.sdk.codec import Codec, parameter_hints, result_of
from troth.sdk.errors import ExecutionSignal, FunctionNotFoundError, Suspended
from troth.sdk.execution import STEP_TAG, Execution, Runtime
from troth.sdk.network import anycast, target_address
from troth.sdk.options import Options, as_timedelta, deadline, split_options
from troth.sdk.registry import function_name, invocation_data, takes_context
from troth.sdk.retry import Exponential, Never, RetryPolicy, next_retry

log = logging.getLogger("troth.sdk")

T = TypeVar("T")

SCOPE = "resonate:scope"


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
        return result_of(record, self._execution.runtime.codec, self._hint)

    def __repr__(self) -> str:
        return f"<DurableFuture {self.id}>"


async def invoke(
    runtime: Runtime,
    fn: Callable[..., Any],
    ctx: Context | None,
    args: tuple[Any, ...] | list[Any],
    kwargs: dict[str, Any],
) -> Any:
    """Call a durable function with ``ctx``, or a plain one without: ``async def`` in the
    loop, ``def`` in a worker thread so a long step cannot starve the heartbeat."""
    if ctx is not None:
        result = fn(ctx, *args, **kwargs)
        return await result if inspect.isawaitable(result) else result
    runtime.active_steps += 1
    try:
        if inspect.iscoroutinefunction(fn):
            return await fn(*args, **kwargs)
        result = await asyncio.to_thread(fn, *args, **kwargs)
        return await result if inspect.isawaitable(result) else result
    finally:
        runtime.active_steps -= 1


def encode_outcome(codec: Codec, outcome: Any) -> Value:
    """A result or an error as a value; a result the codec cannot encode becomes that error."""
    try:
        return codec.encode(outcome)
    except Exception as error:
        if isinstance(outcome, BaseException):
            return codec.encode(RuntimeError(f"{type(outcome).__name__}: {outcome}"))
        return codec.encode(error)


class Context:
    def __init__(
        self, execution: Execution, id: str, origin: str, branch: str, timeout_at: int
    ) -> None:
        self._execution = execution
        self._seq = 0
        self.id = id
        self.origin = origin
        self.branch = branch
        self.timeout_at = timeout_at
        self.attempt = 1

    # -- local steps ------------------------------------------------------------------------

    def run(self, fn: Callable[..., Any] | str, *args: Any, **kwargs: Any) -> DurableFuture[Any]:
        """Run ``fn`` here as a durable step: recorded once, never repeated once finished.

        ``fn`` may be a plain function (``def`` runs in a thread, ``async def`` in the
        loop; retried with ``Exponential()`` by default) or a durable function taking a
        ``Context`` (not retried as a whole by default).
        """
        opts, kwargs = split_options(kwargs)
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
        policy = policy or (Never() if durable else Exponential())
        timeout = opts.timeout or (entry.timeout if entry else None)
        id, step = self._next(opts)
        work = self._local(id, step, name, func, durable, args, kwargs, policy, opts, timeout)
        task = self._execution.spawn(work, step=True)
        return DurableFuture(self._execution, id, task, parameter_hints(func)[1])

    begin_run = run

    def now(self) -> DurableFuture[datetime]:
        """The current time, recorded on first run so a replay sees the same instant."""
        self._guard()
        clock = self._execution.runtime.clock
        id, step = self._next(Options())
        work = self._local(
            id, step, "troth.now", lambda: clock.now() / 1000, False, (), {}, Never(), Options()
        )
        return DurableFuture(self._execution, id, self._execution.spawn(work, step=True), datetime)

    def random(self) -> float:
        """A number in [0, 1) that is the same on every replay (derived from the call's id)."""
        id, _ = self._next(Options())
        return _random.Random(id).random()

    def uuid(self) -> _uuid.UUID:
        """A UUID that is the same on every replay (derived from the call's id)."""
        id, _ = self._next(Options())
        return _uuid.UUID(bytes=hashlib.sha256(id.encode()).digest()[:16], version=4)

    async def _local(
        self,
        id: str,
        step: int,
        name: str,
        fn: Callable[..., Any],
        durable: bool,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        policy: RetryPolicy,
        opts: Options,
        timeout: timedelta | None = None,
    ) -> PromiseRecord:
        execution = self._execution
        expected = f"run:{name}"
        record = execution.recorded(id)
        if record is None:
            tags = {SCOPE: "local", **self._lineage(id, own_branch=False), STEP_TAG: expected}
            tags.update(opts.tags)
            param = execution.runtime.codec.encode({"func": name})
            now = execution.runtime.clock.now()
            request = PromiseCreateRequest(id, deadline(now, timeout, self.timeout_at), param, tags)
            record = await execution.create(request)
        execution.check(record, step, expected)
        if record.state != PromiseState.PENDING:
            return record
        state, value = await self._attempt(record, fn, durable, args, kwargs, policy, opts)
        return await execution.settle(id, state, value)

    async def _attempt(
        self,
        record: PromiseRecord,
        fn: Callable[..., Any],
        durable: bool,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        policy: RetryPolicy,
        opts: Options,
    ) -> tuple[SettleState, Value]:
        runtime = self._execution.runtime
        attempt = 1
        while True:
            if signal := self._execution.lost():
                raise signal
            try:
                child = None
                if durable:
                    child = Context(
                        self._execution, record.id, self.origin, self.branch, record.timeout_at
                    )
                    child.attempt = attempt
                result = await invoke(runtime, fn, child, args, kwargs)
                return SettleState.RESOLVED, encode_outcome(runtime.codec, result)
            except ExecutionSignal:
                raise
            except Exception as error:
                wait = next_retry(
                    policy,
                    attempt,
                    error,
                    opts.non_retryable,
                    runtime.clock.now(),
                    record.timeout_at,
                )
                if wait is None:
                    return SettleState.REJECTED, encode_outcome(runtime.codec, error)
                log.info(
                    "step %s failed (attempt %d: %r); retrying in %.3g s",
                    record.id,
                    attempt,
                    error,
                    wait,
                )
                await runtime.clock.sleep(wait)
                attempt += 1

    # -- remote calls and promises ----------------------------------------------------------

    def rpc(self, fn: Callable[..., Any] | str, *args: Any, **kwargs: Any) -> DurableFuture[Any]:
        """Run ``fn`` on any worker of ``target`` (default: this app's group) and await it.

        The param is ``invocation_data``, the shape every Resonate SDK reads.
        """
        opts, kwargs = split_options(kwargs)
        return self._call_remote("rpc", fn, args, kwargs, opts, cap=self.timeout_at)

    begin_rpc = rpc

    def detached(self, fn: Callable[..., Any] | str, *args: Any, **kwargs: Any) -> DurableFuture:
        """Start ``fn`` as an execution of its own: its deadline is not capped by this one's
        and nothing here waits for it unless the returned future is awaited."""
        opts, kwargs = split_options(kwargs)
        return self._call_remote("detached", fn, args, kwargs, opts, cap=None)

    def _call_remote(
        self,
        kind: str,
        fn: Callable[..., Any] | str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        opts: Options,
        cap: int | None,
    ) -> DurableFuture[Any]:
        """A child promise targeted at another worker; ``cap`` bounds its deadline."""
        self._guard()
        name, version, hint = self._remote(fn, opts)
        id, step = self._next(opts)
        target = target_address(opts.target) if opts.target else anycast(self._group())
        # Even a detached child keeps this tree's origin (ids below a root share it); every
        # remote child starts a branch of its own.
        tags = {SCOPE: "global", TARGET: target, **self._lineage(id, own_branch=True)}
        tags[STEP_TAG] = f"{kind}:{name}"
        tags.update(opts.tags)
        param = self._execution.runtime.codec.encode(invocation_data(name, version, args, kwargs))
        now = self._execution.runtime.clock.now()
        request = PromiseCreateRequest(id, deadline(now, opts.timeout, cap), param, tags)
        return self._child(id, step, request, hint)

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
        id, step = self._next(Options())
        tags = {SCOPE: "global", TIMER: "true", **self._lineage(id, own_branch=True)}
        tags[STEP_TAG] = "sleep"
        request = PromiseCreateRequest(id, min(wake, self.timeout_at), Value(), tags)
        return self._child(id, step, request, None)

    def promise(
        self,
        *,
        timeout: timedelta | float | None = None,
        id: str | None = None,
        data: Any = None,
        tags: dict[str, str] | None = None,
    ) -> DurableFuture[Any]:
        """A promise that something outside settles (``app.promises.resolve(p.id, ...)``).

        An explicit ``id`` must extend this execution's id for the execution to await it.
        """
        self._guard()
        opts = Options(timeout=as_timedelta(timeout), id=id)
        promise_id, step = self._next(opts)
        all_tags = {SCOPE: "global", **self._lineage(promise_id, own_branch=True)}
        all_tags[STEP_TAG] = "promise"
        all_tags.update(tags or {})
        codec = self._execution.runtime.codec
        param = codec.encode(data) if data is not None else Value()
        now = self._execution.runtime.clock.now()
        at = deadline(now, opts.timeout, self.timeout_at)
        request = PromiseCreateRequest(promise_id, at, param, all_tags)
        return self._child(promise_id, step, request, None, deadline_timer=True)

    def _child(
        self,
        id: str,
        step: int,
        request: PromiseCreateRequest,
        hint: Any,
        deadline_timer: bool = False,
    ) -> DurableFuture[Any]:
        """A child promise created (or found) at once; ``deadline_timer`` adds a timer at
        its deadline, for promises the server does not time out on its own (see below)."""
        expected = request.tags[STEP_TAG]
        execution = self._execution
        timer_id = child_id(id, "deadline")

        async def create() -> PromiseRecord:
            record = execution.recorded(id) or await execution.create(request)
            execution.check(record, step, expected)
            if deadline_timer and record.state == PromiseState.PENDING:
                # A promise without a target is not swept at its deadline (Lean arms promise
                # timeouts only for targeted and timer promises), so nothing would resume an
                # execution awaiting it. A timer at the same instant, awaited alongside,
                # resumes it; the replay then reads the promise as timed out.
                tags = {SCOPE: "global", TIMER: "true", **self._lineage(timer_id, True)}
                timer = PromiseCreateRequest(timer_id, record.timeout_at, Value(), tags)
                if execution.recorded(timer_id) is None:
                    await execution.create(timer)
            return record

        wake = (timer_id,) if deadline_timer else ()
        return DurableFuture(execution, id, execution.spawn(create()), hint, wake)

    # -- helpers ----------------------------------------------------------------------------

    def _guard(self) -> None:
        signal = self._execution.refuse()
        if signal is not None:
            raise signal

    def _next(self, opts: Options) -> tuple[str, int]:
        step = self._seq
        self._seq += 1
        return (opts.id or child_id(self.id, str(step))), step

    def _group(self) -> str:
        return self._execution.runtime.network.group

    def _lineage(self, id: str, own_branch: bool) -> dict[str, str]:
        """The origin/parent/branch tags of a child; an explicit id outside this execution's
        tree starts a lineage of its own (the server requires ids to extend these tags)."""
        return {
            ORIGIN: self.origin if descends(id, self.origin) else id,
            PARENT: self.id if descends(id, self.id) else id,
            BRANCH: id if own_branch or not descends(id, self.branch) else self.branch,
        }

    def _remote(self, fn: Callable[..., Any] | str, opts: Options) -> tuple[str, int | None, Any]:
        """The name, pinned version and return hint of a function run elsewhere."""
        if isinstance(fn, str):
            return fn, opts.version, None
        entry = self._execution.runtime.registry.of(fn)
        name = entry.name if entry else function_name(fn)
        version = opts.version or (entry.version if entry else None)
        return name, version, parameter_hints(fn)[1]
