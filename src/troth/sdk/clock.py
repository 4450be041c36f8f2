"""Where the SDK reads the time and waits: the wall clock, or a virtual one for tests.

Every deadline the SDK computes (a child's ``timeoutAt``, a sleep's wake time, a retry's
delay) and, in embedded mode, the ``now`` given to the engine come from one ``Clock``, so
swapping in ``VirtualClock`` makes a day-long sleep a jump of a number rather than a wait.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> int:
        """Milliseconds since the epoch."""
        ...

    async def sleep(self, seconds: float) -> None: ...


class WallClock:
    def now(self) -> int:
        return time.time_ns() // 1_000_000

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class VirtualClock:
    """Time that moves only when told to; sleepers wake when it passes their deadline."""

    def __init__(self, start: int = 1_700_000_000_000) -> None:
        self._now = start
        self._sleepers: list[tuple[int, int, asyncio.Future[None]]] = []
        self._order = itertools.count()
        self.changed = asyncio.Event()

    def now(self) -> int:
        return self._now

    async def sleep(self, seconds: float) -> None:
        wake = self._now + max(0, round(seconds * 1000))
        if wake <= self._now:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (wake, next(self._order), future))
        self.changed.set()
        await future

    def next_wake(self) -> int | None:
        """The earliest deadline of a sleeper still waiting, or None."""
        while self._sleepers and self._sleepers[0][2].done():
            heapq.heappop(self._sleepers)
        return self._sleepers[0][0] if self._sleepers else None

    def advance_to(self, when: int) -> None:
        """Move time forward (never back) and wake every sleeper now due."""
        self._now = max(self._now, when)
        while self._sleepers and self._sleepers[0][0] <= self._now:
            _, _, future = heapq.heappop(self._sleepers)
            if not future.done():
                future.set_result(None)
        self.changed.set()
