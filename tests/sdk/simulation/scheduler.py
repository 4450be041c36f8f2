"""The discrete-event core: virtual time, one event queue, and tasks owned by workers.

Everything the simulation waits for — a request reaching the server, a reply or a message
reaching a worker, a sleep ending, a crash — is an event in one queue ordered by (time,
sequence). Between events the asyncio loop runs until nothing is ready (``quiesce``), so
the only source of ordering is the queue, and a seed fixes the whole run: there are no
threads, no I/O and no wall-clock timers in the simulated path (``quiesce`` fails if one
appears).

A crash must discard everything a worker was doing. A task factory records which worker
("owner", a context variable inherited by every task a worker's task creates) each asyncio
task belongs to, so ``kill`` can cancel all of them.
"""

from __future__ import annotations

import asyncio
import contextvars
import heapq
import itertools
from collections.abc import Callable, Coroutine
from functools import partial
from typing import Any

OWNER: contextvars.ContextVar[str | None] = contextvars.ContextVar("sim_owner", default=None)

Action = Callable[[], None]


class SimulationError(AssertionError):
    """The simulation itself went wrong: stuck, out of time, or no longer deterministic."""


class Scheduler:
    def __init__(self, start: int) -> None:
        self.start = start
        self.trace: list[str] = []
        self._now = start
        self._order = itertools.count()
        self._queue: list[tuple[int, int, Action]] = []
        self._seq = itertools.count()
        self._owned: dict[str, list[asyncio.Task[Any]]] = {}
        self._dead: list[str] = []
        self.graceful = 0  # graceful stops in progress: the only place a loop timer may be

    # -- the clock (troth.sdk.clock.Clock) --------------------------------------------------

    def now(self) -> int:
        return self._now

    async def sleep(self, seconds: float) -> None:
        ms = max(0, round(seconds * 1000))
        if ms == 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.after(ms, partial(_wake, future))
        await future

    # -- events -----------------------------------------------------------------------------

    def at(self, when: int, action: Action) -> None:
        heapq.heappush(self._queue, (max(when, self._now), next(self._seq), action))

    def after(self, ms: int, action: Action) -> None:
        self.at(self._now + ms, action)

    def next_time(self) -> int | None:
        return self._queue[0][0] if self._queue else None

    def advance_to(self, when: int) -> None:
        self._now = max(self._now, when)

    def pop_due(self) -> Action | None:
        """The next event if it is due now."""
        if self._queue and self._queue[0][0] <= self._now:
            return heapq.heappop(self._queue)[2]
        return None

    # -- the record of the run ----------------------------------------------------------------

    def order(self) -> int:
        """The next position in the run's total order of effects and settlements."""
        return next(self._order)

    def log(self, line: str) -> None:
        self.trace.append(f"{self._now - self.start:>7} {line}")

    # -- worker tasks -----------------------------------------------------------------------

    def task_factory(
        self,
        loop: asyncio.AbstractEventLoop,
        coro: Coroutine[Any, Any, Any],
        context: contextvars.Context | None = None,
    ) -> asyncio.Task[Any]:
        task = asyncio.Task(coro, loop=loop, context=context)
        owner = context.get(OWNER) if context is not None else OWNER.get()
        if owner is not None:
            self._owned.setdefault(owner, []).append(task)
        return task

    def spawn(self, owner: str, work: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Start ``work`` as a task of ``owner`` (so do the tasks it starts)."""
        context = contextvars.copy_context()
        context.run(OWNER.set, owner)
        return asyncio.get_running_loop().create_task(work, context=context)

    def call_as(self, owner: str, fn: Callable[..., Any], *args: Any) -> Any:
        """Call ``fn`` synchronously as ``owner``: tasks it starts belong to ``owner``."""
        context = contextvars.copy_context()
        context.run(OWNER.set, owner)
        return context.run(fn, *args)

    def kill(self, owner: str) -> None:
        """Cancel every task of ``owner``, now and (in ``quiesce``) any it starts dying."""
        self._dead.append(owner)
        self._cancel(owner)

    def _cancel(self, owner: str) -> bool:
        live = [t for t in self._owned.pop(owner, []) if not t.done()]
        for task in live:  # creation order, so the unwinding is the same on every run
            task.cancel()
        self._owned[owner] = live
        return bool(live)

    async def quiesce(self) -> None:
        """Run the loop until no callback is ready and every killed task has finished."""
        loop = asyncio.get_running_loop()
        ready = loop._ready  # type: ignore[attr-defined] - no public way to ask "idle?"
        while True:
            # A sleep(0) puts this coroutine behind every ready callback; finding the queue
            # empty when it resumes means nothing else can run until an event fires.
            await asyncio.sleep(0)
            if ready:
                continue
            if not any([self._cancel(owner) for owner in self._dead]):
                break
        timers = loop._scheduled  # type: ignore[attr-defined]
        if not self.graceful and any(not handle.cancelled() for handle in timers):
            raise SimulationError(
                "a loop timer was armed in the simulated path outside a graceful stop: SDK "
                "code that waits on the loop's clock instead of its Clock: "
                f"{[h for h in timers if not h.cancelled()]}"
            )


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():  # a sleeper cancelled by a crash stays cancelled
        future.set_result(None)
