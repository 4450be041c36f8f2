"""Testing durable functions: an in-process app on virtual time.

``VirtualTroth`` is an embedded ``Troth`` (on a temporary SQLite file unless ``db`` is
given) whose clock only moves when nothing else can happen: whenever the engine, the
worker and every running step are idle, time jumps to the next deadline (a sleep's wake,
a promise timeout, a retry's backoff, a lease). So a workflow that sleeps for a day
finishes in milliseconds, and what it observes is what it would observe in real time::

    from troth.testing import VirtualTroth

    async def test_reminder():
        app = VirtualTroth()
        app.register(remind_tomorrow)
        async with app:
            assert await app.run("r-1", remind_tomorrow, "ana").result() == "reminded ana"

With ``autojump=False`` time moves only through ``await app.advance(timedelta(...))``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from datetime import timedelta
from typing import Any

from troth.sdk.app import Troth
from troth.sdk.clock import VirtualClock
from troth.sdk.local import LocalNetwork

__all__ = ["VirtualClock", "VirtualTroth"]

# Loop turns per check, and consecutive unchanged checks that count as "idle".
_TURNS = 10
_STABLE = 3


class VirtualTroth(Troth):
    def __init__(
        self,
        group: str = "default",
        db: str | None = None,
        *,
        autojump: bool = True,
        start: int = 1_700_000_000_000,
        **kwargs: Any,
    ) -> None:
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if db is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="troth-test-")
            db = os.path.join(self._tmp.name, "troth.db")
        self.virtual_clock = VirtualClock(start)
        super().__init__(group=group, db=db, clock=self.virtual_clock, **kwargs)
        self.autojump = autojump
        self._jumper: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await super().start()
        if self.autojump and self._jumper is None:
            self._jumper = asyncio.create_task(self._jump(), name="troth-virtual-time")

    async def stop(self) -> None:
        if self._jumper is not None:
            self._jumper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._jumper
            self._jumper = None
        # Stopping waits on this app's clock (the grace period, a retry's backoff): keep
        # virtual time moving until it is done, or it would wait for ever.
        stopping = asyncio.ensure_future(super().stop())
        while not stopping.done():
            wake = self.virtual_clock.next_wake()
            if wake is not None:
                self.virtual_clock.advance_to(wake)
            await asyncio.wait([stopping], timeout=0.002)
        await stopping
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def now(self) -> int:
        return self.virtual_clock.now()

    async def settle(self) -> None:
        """Return once the app has done everything it can at the current instant."""
        network = self.runtime.network
        assert isinstance(network, LocalNetwork)
        stable, last = 0, -1
        while stable < _STABLE:
            for _ in range(_TURNS):
                await asyncio.sleep(0)
            idle = network.quiet() and self.runtime.active_steps == 0
            if idle and network.activity == last:
                stable += 1
            else:
                stable = 0
                if not idle:
                    await asyncio.sleep(0.0005)  # let threads (SQLite, `def` steps) finish
            last = network.activity

    async def advance(self, delta: timedelta) -> None:
        """Move time forward by ``delta``, stopping at every deadline on the way."""
        target = self.virtual_clock.now() + round(delta.total_seconds() * 1000)
        while True:
            await self.settle()
            wake = self.virtual_clock.next_wake()
            if wake is None or wake > target:
                break
            self.virtual_clock.advance_to(wake)
        self.virtual_clock.advance_to(target)
        await self.settle()

    async def _jump(self) -> None:
        while True:
            await self.settle()
            wake = self.virtual_clock.next_wake()
            if wake is None:
                await asyncio.sleep(0.002)  # idle until outside code (the test) acts
            else:
                self.virtual_clock.advance_to(wake)
