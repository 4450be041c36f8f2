"""``ctx.saga()``: compensation as a primitive.

Inside the block, each step that has an effect to undo registers its compensation once it
has finished::

    async with ctx.saga() as saga:
        r = await ctx.run(reserve, order)
        saga.on_failure(release, r)          # registered only once reserve finished
        c = await ctx.run(charge, order)
        saga.on_failure(refund, c)

When the block raises (an error, or ``CanceledError`` after ``app.cancel``), the
compensations registered so far run as durable steps of the execution, in reverse order
(``parallel=True``: all at once), inside ``ctx.shield()`` so that a cancellation cannot
stop them. Each retries by its own policy (``saga.options(retry=...).on_failure(...)``,
else the one its function was registered with, else ``Exponential()``). Then the block's
error propagates unchanged; if compensations failed too, an ``ExceptionGroup`` of the
error and their failures propagates instead (``except* CanceledError`` still finds it).

Exactly once across crashes, with no record of its own: registration is code, so a replay
registers the same compensations in the same order, meets the same error (from the
records), and makes the same compensation calls at the same positions, which answer from
their records; only one cut off by the crash runs again (by its retry policy, like any
step). An execution that suspends or stops inside the block compensates nothing: those
are not failures.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, NamedTuple, Protocol, Unpack, cast

from troth.sdk.options import StepOptions, options
from troth.sdk.signatures import Compensate, DurableCall


class StepCalls(Protocol):
    """``ctx.options(...)``, as a saga uses it: ``run`` a compensation's step."""

    @property
    def run(self) -> DurableCall: ...


class Host(Protocol):
    """What a saga needs of its context (a ``Context``), all of it public: calls with
    options, and a shield for the compensations."""

    def options(self, **given: Unpack[StepOptions]) -> StepCalls: ...

    def shield(self) -> AbstractAsyncContextManager[None]: ...


class Compensation(NamedTuple):
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    options: StepOptions  # as given to ``saga.options(...)``, for ``ctx.options(...)``


class Compensations:
    """``on_failure``: register a compensation (with default options, or those given to
    ``saga.options(...)``). Everything after the function is its own arguments, typed by
    its signature."""

    _saga: Saga
    _options: StepOptions

    @property
    def on_failure(self) -> Compensate:
        """Run ``fn(*args, **kwargs)`` as a durable step if the block fails."""
        return cast(Compensate, functools.partial(self._saga._register, self._options))


class CompensationsWith(Compensations):
    def __init__(self, saga: Saga, given: StepOptions) -> None:
        self._saga = saga
        self._options = given


class Saga(Compensations):
    def __init__(self, ctx: Host, parallel: bool = False) -> None:
        self._ctx = ctx
        self._parallel = parallel
        self._registered: list[Compensation] = []
        self._saga = self
        self._options: StepOptions = {}

    def options(self, **given: Unpack[StepOptions]) -> CompensationsWith:
        """``on_failure`` with these options for the compensation's step."""
        options(**given)  # refused now if it is wrong, not when the block fails
        return CompensationsWith(self, given)

    def _register(
        self, given: StepOptions, fn: Callable[..., Any], /, *args: Any, **kwargs: Any
    ) -> None:
        self._registered.append(Compensation(fn, args, kwargs, given))

    async def __aenter__(self) -> Saga:
        return self

    async def __aexit__(self, kind: object, error: BaseException | None, tb: object) -> bool:
        if not isinstance(error, Exception):
            return False  # no error, or a control signal (suspend, stop): nothing failed
        failures = await self.compensate()
        if failures:
            raise ExceptionGroup(
                f"{len(failures)} of {len(self._registered)} compensations failed",
                [error, *failures],
            )
        return False

    async def compensate(self) -> list[Exception]:
        """Run the registered compensations, last first (or all at once); their failures."""
        ctx = self._ctx
        failures: list[Exception] = []
        async with ctx.shield():
            calls = list(reversed(self._registered))
            if self._parallel:
                futures = [ctx.options(**c.options).run(c.fn, *c.args, **c.kwargs) for c in calls]
                outcomes = await asyncio.gather(*futures, return_exceptions=True)
                for outcome in outcomes:
                    if isinstance(outcome, Exception):
                        failures.append(outcome)
                    elif isinstance(outcome, BaseException):
                        raise outcome  # a control signal (suspend, stop) unwinds as it is
            else:
                for c in calls:
                    try:
                        await ctx.options(**c.options).run(c.fn, *c.args, **c.kwargs)
                    except Exception as e:
                        failures.append(e)
        return failures
