"""The timeouts loop: fire stored deadlines as time passes, for the server and embedded mode.

One loop serves both, because both run the same machine over the same ``Timers``; it lives
beside them in storage, the lowest package that ``troth.server`` and embedded mode
(``troth.sdk.local``) may both import.

Deadlines live in storage, so nothing here needs to survive a restart: on start the loop
reads the earliest deadline, finds it in the past, and fires everything that came due while
nothing ran (schedules catch up on their missed occurrences).

The loop sleeps until the earliest deadline. A commit in this process pokes it to look
again, because the request may have armed a deadline earlier than the one it sleeps
towards; a poke that says which deadline the commit armed (embedded mode's) wakes the loop
only if that one comes first, so a steady stream of work that arms later deadlines (leases,
step timeouts) costs the loop no reads. Pokes are coalesced: after one the loop waits
``coalesce_ms`` (capped by the time to its deadline) for more before reading the deadline
again, so a busy process reads it a few dozen or hundred times a second rather than once
per request; a deadline a request armed closer than that fires at most that late. Where
other processes may arm deadlines unseen (servers sharing PostgreSQL), ``max_sleep_ms``
bounds the sleep; embedded mode has none, its watch loop pokes it on other processes'
commits instead. ``pause`` (the server's ``debug.start``) stops the firing; deadlines then
fire only through ``debug.tick``.

However large the backlog (a schedule owing millions of occurrences), ``fire_due`` works
through it in short transactions of bounded work and yields between them (a schedule
catches up a chunk per firing: docs/semantics.md, "Schedule catch-up"), so requests, health
checks and shutdown are served meanwhile; cancelling the loop stops it between two.

Time comes from ``now`` and waits for a deadline go through ``sleep``: the server's wall
clock and ``asyncio.sleep``, or an app's clock, so that a virtual one (``troth.testing``)
fires a day-long timer by a jump of a number. Coalescing and the wait after a failure are
real time: they pace the storage, not the machine.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from troth.storage.service import Timers

log = logging.getLogger(__name__)

_RETRY_MS = 1000  # after a failed pass, when max_sleep_ms does not say


class _StillDue(Exception):
    """Firing at ``now`` left a deadline at or before ``now``: the loop must not spin on it."""


class TimeoutsLoop:
    def __init__(
        self,
        timers: Timers,
        *,
        now: Callable[[], int],
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        coalesce_ms: int,
        max_sleep_ms: int | None = None,
    ) -> None:
        self._timers = timers
        self._now = now
        self._sleep = sleep
        self._coalesce = coalesce_ms / 1000
        self._max_sleep = None if max_sleep_ms is None else max_sleep_ms / 1000
        self._retry = (max_sleep_ms or _RETRY_MS) / 1000
        self._running = asyncio.Event()
        self._running.set()
        self._poked = asyncio.Event()
        # The deadline the loop sleeps towards; None while it has none or is reading one.
        self._awaiting: int | None = None

    @property
    def paused(self) -> bool:
        return not self._running.is_set()

    def pause(self) -> None:
        self._running.clear()
        self._poked.set()

    def resume(self) -> None:
        self._running.set()
        self._poked.set()

    def poke(self, armed: int | None = None) -> None:
        """A commit may have armed an earlier deadline: ``armed``, the earliest it did, when
        the caller knows it."""
        if armed is not None and self._awaiting is not None and armed >= self._awaiting:
            return  # the loop wakes by then anyway and fires it with the rest
        self._poked.set()

    async def run(self) -> None:
        while True:
            await self._running.wait()
            self._poked.clear()
            # Every poke counts during the pass: its read may not see the poking commit.
            self._awaiting = None
            try:
                deadline = await self._fire_due()
            except _StillDue as e:
                log.warning("%s", e)
                await self._wait(self._retry, asyncio.sleep)
                continue
            except Exception:
                log.exception("timeouts pass failed")
                await self._wait(self._retry, asyncio.sleep)
                continue
            self._awaiting = deadline
            await self._wait(self._until(deadline), self._sleep)

    async def _fire_due(self) -> int | None:
        """Fire what is due now; the next deadline."""
        deadline = await self._timers.next_deadline()
        now = self._now()
        if deadline is not None and deadline <= now and not self.paused:
            fired = await self._timers.fire_due(now)
            log.debug("fired %d timeouts at %d", fired, now)
            deadline = await self._timers.next_deadline()
            if deadline is not None and deadline <= now:
                raise _StillDue(f"timeout at {deadline} still due after firing at {now}")
        return deadline

    def _until(self, deadline: int | None) -> float | None:
        """Seconds to sleep towards ``deadline``, at most max_sleep; None: until poked."""
        if deadline is None:
            return self._max_sleep
        delay = max(0, deadline - self._now()) / 1000
        return delay if self._max_sleep is None else min(self._max_sleep, delay)

    async def _wait(self, delay: float | None, sleep: Callable[[float], Awaitable[None]]) -> None:
        """Until ``delay`` has passed on ``sleep``, or a poke (then a moment for more)."""
        waits: list[asyncio.Future[object]] = [asyncio.ensure_future(self._poked.wait())]
        if delay is not None:
            waits.append(asyncio.ensure_future(sleep(delay)))
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()
        if self._poked.is_set() and self._coalesce:
            await asyncio.sleep(self._coalesce if delay is None else min(self._coalesce, delay))
