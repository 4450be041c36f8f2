"""Loop stalls: code that holds the event loop, named, timed and said out loud.

Every execution of a process shares one event loop, so a step that blocks it (``time.sleep``
or a blocking client inside an ``async def``, a long ``inline=True`` step) stops every
other execution of the process meanwhile. Heartbeats no longer wait for the loop
(``troth.sdk.heartbeat``), so the lease survives the block; the block itself must not go
unnoticed.

So each stretch of user code between two ``await`` points (one ``send`` into its coroutine,
or one call of an inline step) is timed, and a stretch of ``threshold`` seconds or more is
a **stall**: logged at ERROR with the execution, the step and how long the loop was
blocked, once per step; counted in the SDK's metrics; and kept with the step's outcome
(the ``troth:stalled-ms`` header of its value), where ``troth tree`` and the console's call
tree show it. Nested code (a durable function awaiting its step) is charged only for its
own time, so a stall is reported once, on the innermost code that caused it.

A stall that does not end is seen from a thread of its own (``LoopWatch``): while the loop
is held, it logs at ERROR after ``STILL_BLOCKED`` seconds and then once a minute, so a hung
worker is never silent.
"""

from __future__ import annotations

import logging
import threading
import time
import types
from collections.abc import Callable, Coroutine, Generator
from dataclasses import dataclass
from typing import Any, TypeVar

from troth.protocol.conventions import STALLED_HEADER
from troth.protocol.records import Value
from troth.protocol.subjects import PROMISE_ID, TASK_ID

log = logging.getLogger(__name__)

T = TypeVar("T")

STALL_AFTER = 1.0
"""Seconds a stretch of code may hold the loop before it is a stall (a quarter of the lease
when that is shorter): Temporal's deadlock detector allows a workflow task one second."""

STILL_BLOCKED = 10.0
"""Seconds the loop may be held before the watch thread says so while it lasts."""

_REPEAT = 60.0  # seconds between reports of the same unending stall


@dataclass(frozen=True)
class Where:
    """Whose code runs: an execution, and the step (None: the function of the execution)."""

    execution: str
    step: str | None
    function: str

    def __str__(self) -> str:
        if self.step is None:
            return f"function {self.function} of execution {self.execution}"
        return f"step {self.function} ({self.step}) of execution {self.execution}"


class Stalls:
    """The stall bookkeeping of one app's runtime (the loop's thread, and the watch)."""

    def __init__(self, ttl_ms: int, on_stall: Callable[[Where, float], None] | None = None):
        self.ttl_ms = ttl_ms
        self.threshold = min(STALL_AFTER, ttl_ms / 4000)
        self._on_stall = on_stall or (lambda where, seconds: None)
        self.current: _Stretch | None = None  # the code holding the loop now, if any
        self._accounted = 0.0  # seconds charged to ended stretches so far (for nesting)
        self._reported: set[tuple[str, str | None]] = set()
        self.longest: dict[tuple[str, str | None], float] = {}  # by execution and step

    def timed(self, coro: Coroutine[Any, Any, T], where: Where) -> Coroutine[Any, Any, T]:
        """``coro``, each of whose stretches between awaits is timed."""
        return _driven(coro, self, where)

    def call(self, fn: Callable[..., T], where: Where, *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` on the loop's thread, timed as one stretch."""
        stretch = _Stretch(self, where)
        try:
            return fn(*args, **kwargs)
        finally:
            stretch.end()

    def stalled_ms(self, where: Where) -> int | None:
        """The longest stall of ``where``'s code so far, in ms, and forget it."""
        seconds = self.longest.pop((where.execution, where.step), None)
        return None if seconds is None else round(seconds * 1000)

    def charge(self, where: Where, started: float, ended: float, mark: float) -> None:
        """A stretch of ``where`` ran from ``started`` to ``ended``; ``mark`` is what was
        accounted when it began, so what nested stretches took since is not charged twice."""
        own = (ended - started) - (self._accounted - mark)
        self._accounted += own
        if own < self.threshold:
            return
        key = (where.execution, where.step)
        self.longest[key] = max(own, self.longest.get(key, 0.0))
        if len(self.longest) > 10_000:  # outcomes recorded elsewhere (a run handed over)
            del self.longest[next(iter(self.longest))]
        self._on_stall(where, own)
        if key in self._reported:
            return
        self._reported.add(key)
        if len(self._reported) > 10_000:  # forget the oldest
            self._reported.remove(next(iter(self._reported)))
        log.error(
            "%s blocked the event loop for %.1f s (the lease is %.3g s): every other "
            "execution of this process waited; make it await (asyncio.to_thread for "
            "blocking calls) or run it as a plain def step",
            where,
            own,
            self.ttl_ms / 1000,
            extra={PROMISE_ID: where.step or where.execution, TASK_ID: where.execution},
        )


class _Stretch:
    """One stretch of code on the loop: begun when made, charged when ``end`` is called."""

    __slots__ = ("_mark", "_outer", "_stalls", "started", "where")

    def __init__(self, stalls: Stalls, where: Where) -> None:
        self._stalls = stalls
        self.where = where
        self._mark = stalls._accounted
        self._outer = stalls.current
        stalls.current = self
        self.started = time.monotonic()

    def end(self) -> None:
        ended = time.monotonic()
        self._stalls.current = self._outer
        self._stalls.charge(self.where, self.started, ended, self._mark)


@types.coroutine
def _driven(coro: Coroutine[Any, Any, T], stalls: Stalls, where: Where) -> Generator[Any, Any, T]:
    """Run ``coro`` as its task would, timing each ``send`` (or ``throw``) into it."""
    value: Any = None
    error: BaseException | None = None
    while True:
        stretch = _Stretch(stalls, where)
        try:
            yielded = coro.send(value) if error is None else coro.throw(error)
        except StopIteration as done:
            stretch.end()
            return done.value  # type: ignore[no-any-return]
        except BaseException:
            stretch.end()
            raise
        stretch.end()
        value, error = None, None
        try:
            value = yield yielded
        except BaseException as e:  # a cancellation, or a close: the coroutine decides
            error = e


def mark(value: Value, stalled_ms: int | None) -> Value:
    """``value`` with the ``troth:stalled-ms`` header, if its code stalled the loop."""
    if stalled_ms is None:
        return value
    headers = {**(value.headers or {}), STALLED_HEADER: str(stalled_ms)}
    return Value(headers=headers, data=value.data)


class LoopWatch:
    """A thread that sees a stall while it lasts: the loop's thread cannot report on itself
    until the blocking code returns, and code that never returns would otherwise hang the
    worker in silence (its heartbeats go on from their own thread)."""

    def __init__(self, stalls: Stalls, every: float = 0.5) -> None:
        self._stalls = stalls
        self._every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="troth-loop-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _watch(self) -> None:
        said: tuple[object, float] | None = None  # the stretch last reported, and when
        while not self._stop.wait(self._every):
            stretch = self._stalls.current
            if stretch is None:
                continue
            held = time.monotonic() - stretch.started
            if held < STILL_BLOCKED:
                continue
            if said is not None and said[0] is stretch and time.monotonic() - said[1] < _REPEAT:
                continue
            said = (stretch, time.monotonic())
            log.error(
                "%s has held the event loop for %.0f s and still does: no other execution "
                "of this process runs meanwhile (its leases are kept)",
                stretch.where,
                held,
                extra={TASK_ID: stretch.where.execution},
            )
