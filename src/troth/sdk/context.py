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

This module is the call surface: each call is checked, given its id and its request, and
handed to what runs it, with a future for its outcome. Below it, and never importing it:
the context's ``Frame`` (numbering, lineage tags, the shield; ``troth.sdk.frames``), the
local-step driver (``troth.sdk.steps``), and the child promises (``troth.sdk.children``).
"""

from __future__ import annotations

import asyncio
import functools
import random as _random
import uuid as _uuid
from collections.abc import Callable, Generator
from datetime import datetime, timedelta
from typing import Any, Generic, TypeVar, Unpack, cast

from troth.protocol.queues import DEBOUNCE_TAG, QUEUE_TAG
from troth.protocol.records import TARGET, TIMER, PromiseRecord, PromiseState, Value
from troth.protocol.requests import PromiseCreateRequest
from troth.sdk import children
from troth.sdk.cancellation import grace_tags
from troth.sdk.codec import parameter_hints, result_of
from troth.sdk.errors import FunctionNotFoundError, Suspended, mark_recorded
from troth.sdk.execution import Execution
from troth.sdk.frames import Frame
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
from troth.sdk.recording import Start
from troth.sdk.registry import function_name, invocation_data, takes_context
from troth.sdk.replay import Call, digest
from troth.sdk.retry import default_policy
from troth.sdk.saga import Saga
from troth.sdk.signatures import DurableCall
from troth.sdk.steps import Step, Steps

T = TypeVar("T")


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
        try:
            return cast(T, result_of(record, self._execution.runtime.codec, self._hint))
        except Exception as error:
            mark_recorded(error)  # a call's outcome, not a bug of this function's code
            raise

    def __repr__(self) -> str:
        return f"<DurableFuture {self.id}>"


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
        self._ctx._frame.shields += 1

    async def __aexit__(self, *exc: object) -> None:
        self._ctx._frame.shields -= 1


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
        self._frame = Frame(execution, id, origin, branch, timeout_at, shielded, start)
        self._steps = Steps(self._frame, Context)
        self.attempt = attempt  # of the function this context runs (1, then its retries)
        self._ctx = self
        self._opts = Options()

    @property
    def id(self) -> str:
        """This context's promise: the execution's root, or a durable step's."""
        return self._frame.id

    @property
    def origin(self) -> str:
        """The root of the tree it belongs to."""
        return self._frame.origin

    @property
    def branch(self) -> str:
        return self._frame.branch

    @property
    def timeout_at(self) -> int:
        """Its deadline (ms since the epoch), which none of its calls can pass."""
        return self._frame.timeout_at

    def options(self, **given: Unpack[CallOptions]) -> CallsWith:
        """The durable calls (``run``, ``rpc``, ``detached``) made with these options (see
        ``troth.sdk.options.Options``): ``ctx.options(timeout=30).run(fetch, url)``."""
        return CallsWith(self, options(**given))

    # -- cancellation and compensation ---------------------------------------------------

    @property
    def shielded(self) -> bool:
        """True inside ``ctx.shield()`` (or in a durable function run from inside one)."""
        return self._frame.shielded

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
        if QUEUE_TAG in opts.tags:
            raise TypeError(
                "the queue option is for executions (ctx.rpc, ctx.detached): a step runs "
                "here, in its execution's own slot"
            )
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
        task = self._execution.spawn(self._steps.run(step), step=True)
        return DurableFuture(self._execution, step.id, task, hint)

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
        if DEBOUNCE_TAG in opts.tags:
            # A child is this execution's own step: collapsing it into another would
            # hand this history another execution's result.
            raise TypeError("the debounce option is for starts from outside a workflow")
        name, version, hint, registered = self._remote(fn, opts)
        codec = self._execution.runtime.codec
        param = codec.encode(invocation_data(name, version, args, kwargs))
        id = self._next(opts.id)
        target = target_address(opts.target) if opts.target else anycast(self._group())
        # Even a detached child keeps this tree's origin (ids below a root share it); every
        # remote child starts a branch of its own.
        call = Call(kind, name, digest(args, kwargs))
        tags = {**self._frame.tags(id, "global", call), TARGET: target, **opts.tags}
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
        tags = {**self._frame.tags(id, "global", call), TIMER: "true"}
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
        all_tags = {**self._frame.tags(promise_id, "global", call), **(tags or {})}
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
        """A child promise created (or found) at once (``troth.sdk.children``);
        ``deadline_timer`` adds a timer at its deadline, awaited alongside."""
        execution = self._execution
        made = children.create(self._frame, id, call, request, self.shielded, deadline_timer)
        wake = (children.timer_of(id),) if deadline_timer else ()
        return DurableFuture(execution, id, execution.spawn(made), hint, wake)

    # -- helpers ----------------------------------------------------------------------------

    def _guard(self) -> None:
        self._frame.guard()

    def _next(self, explicit: str | None) -> str:
        return self._frame.next(explicit)

    def _finish(self) -> None:
        """The replay check at this context's end (``Frame.finish``); ``invoke`` calls it
        when the durable function returns."""
        self._frame.finish()

    def _group(self) -> str:
        return self._execution.runtime.network.group

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
