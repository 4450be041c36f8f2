"""The call shapes of the SDK: a function, then its own arguments, typed by its signature.

``ctx.run(charge, "acct", cents=5)``, ``app.run("pay-7", charge, "acct", cents=5)`` and
``saga.on_failure(refund, receipt)`` all take a function and then exactly the arguments
that function takes, so a type checker checks them against its parameters and gives the
result the function's return type. The overloads that say so live here, once, side by
side: a durable function (one taking a ``Context`` first), an ``async def``, a plain
``def``, and (where the call allows it) a registered function's name.

Annotations only: this module is imported for its types and runs nothing. It names
``Context`` (and the futures and handles the calls return) under ``TYPE_CHECKING``, which
is the one type-only back edge the structure test allows (``tests/test_structure.py``):
``Concatenate[Context, P]`` must name the concrete class, since a function taking a
``Context`` is not a function taking some protocol of it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import (
    TYPE_CHECKING,
    Any,
    Concatenate,
    ParamSpec,
    Protocol,
    TypeAlias,
    TypeVar,
    overload,
)

if TYPE_CHECKING:
    from troth.sdk.client import Handle
    from troth.sdk.context import Context, DurableFuture

P = ParamSpec("P")
T = TypeVar("T")

DurableFunction: TypeAlias = Callable[Concatenate["Context", P], Awaitable[T]]
"""A durable function: it takes a ``Context``, then its own parameters ``P``."""


class DurableCall(Protocol):
    """``ctx.run``, ``ctx.rpc`` and ``ctx.detached``: a function, then its own arguments; the
    future's value has the function's return type."""

    @overload
    def __call__(
        self, fn: DurableFunction[P, T], /, *args: P.args, **kwargs: P.kwargs
    ) -> DurableFuture[T]: ...
    @overload
    def __call__(
        self, fn: Callable[P, Awaitable[T]], /, *args: P.args, **kwargs: P.kwargs
    ) -> DurableFuture[T]: ...
    @overload
    def __call__(
        self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs
    ) -> DurableFuture[T]: ...
    @overload
    def __call__(self, fn: str, /, *args: Any, **kwargs: Any) -> DurableFuture[Any]: ...


class ExecutionStart(Protocol):
    """``app.run`` and ``app.rpc``: an execution id, a function, then the function's own
    arguments; the handle's ``result()`` has the function's return type."""

    @overload
    def __call__(
        self, id: str, fn: DurableFunction[P, T], /, *args: P.args, **kwargs: P.kwargs
    ) -> Handle[T]: ...
    @overload
    def __call__(
        self, id: str, fn: Callable[P, Awaitable[T]], /, *args: P.args, **kwargs: P.kwargs
    ) -> Handle[T]: ...
    @overload
    def __call__(
        self, id: str, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs
    ) -> Handle[T]: ...
    @overload
    def __call__(self, id: str, fn: str, /, *args: Any, **kwargs: Any) -> Handle[Any]: ...


class Compensate(Protocol):
    """``saga.on_failure``: a compensation's function, then its own arguments (run as a
    durable step if the block fails; its value is not kept)."""

    @overload
    def __call__(
        self, fn: DurableFunction[P, Any], /, *args: P.args, **kwargs: P.kwargs
    ) -> None: ...
    @overload
    def __call__(self, fn: Callable[P, Any], /, *args: P.args, **kwargs: P.kwargs) -> None: ...
