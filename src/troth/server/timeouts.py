"""The timeouts loop: fire stored deadlines in wall-clock time.

Deadlines live in storage, so nothing here needs to survive a restart: on start the loop
reads the earliest deadline, finds it in the past, and fires everything that came due
while the server was down (schedules catch up on their missed occurrences).

The loop sleeps until the earliest deadline, but never longer than ``max_sleep`` (another
process sharing the database may arm an earlier one), and a commit on this server pokes it
to look again, because the request may have armed a deadline earlier than the one it sleeps
towards. Pokes are coalesced, so a busy server reads the deadline a few dozen times a second,
not once per request. ``debug.start`` pauses the loop; deadlines then fire only through
``debug.tick``.

However large the backlog (a schedule owing millions of occurrences), ``fire_due`` works
through it in short transactions of bounded work and yields between them (a schedule
catches up a chunk per firing: docs/semantics.md, "Schedule catch-up"), so requests, health
checks and shutdown are served meanwhile; cancelling the loop stops it between two.
"""

from __future__ import annotations

import asyncio
import logging

from troth.server.clock import MonotonicWallClock
from troth.storage.service import Timers

log = logging.getLogger(__name__)

_COALESCE = 0.02  # seconds a poke waits for further pokes before the deadline is re-read


class TimeoutsLoop:
    def __init__(self, service: Timers, clock: MonotonicWallClock, *, max_sleep_ms: int) -> None:
        self._service = service
        self._clock = clock
        self._max_sleep = max_sleep_ms / 1000
        self._running = asyncio.Event()
        self._running.set()
        self._poked = asyncio.Event()

    @property
    def paused(self) -> bool:
        return not self._running.is_set()

    def pause(self) -> None:
        self._running.clear()
        self._poked.set()

    def resume(self) -> None:
        self._running.set()
        self._poked.set()

    def poke(self) -> None:
        """A commit may have armed an earlier deadline."""
        self._poked.set()

    async def run(self) -> None:
        while True:
            await self._running.wait()
            self._poked.clear()
            try:
                delay = await self._fire_due()
            except Exception:
                log.exception("timeouts pass failed")
                delay = self._max_sleep
            try:
                async with asyncio.timeout(delay):
                    await self._poked.wait()
            except TimeoutError:
                continue
            await asyncio.sleep(min(_COALESCE, delay))

    async def _fire_due(self) -> float:
        """Fire what is due now; the seconds until the next deadline (at most max_sleep)."""
        deadline = await self._service.next_deadline()
        now = self._clock.now()
        if deadline is not None and deadline <= now and not self.paused:
            fired = await self._service.fire_due(now)
            log.debug("fired %d timeouts at %d", fired, now)
            deadline = await self._service.next_deadline()
            if deadline is not None and deadline <= now:
                # Firing at ``now`` left a deadline <= now: never spin on it.
                log.warning("timeout at %d still due after firing at %d", deadline, now)
                return self._max_sleep
        if deadline is None:
            return self._max_sleep
        return min(self._max_sleep, max(0, deadline - self._clock.now()) / 1000)
