"""The lease rule: a run records a step's effect only while its task's lease is certainly held.

The server fences every write of a run at the task's version (``task.fence``), so a run
whose task another process took over cannot write. A fence cannot stop a step from
*starting*, though: a run that may have lost its lease must start no step, or a slow run
could repeat a step that the run which took the task over has already recorded.

So this process keeps, for every task it holds, the version its run holds it at and the
instant (by this process's clock, in ms) until which the lease is certainly live: ``ttl``
after the send time of the last acquire or acknowledged heartbeat. The server counts the
lease from the later instant it applied the request, so only the two clocks' rates need to
agree, not their readings. ``Leases`` owns that bookkeeping and the rule; the worker tells
it what it acquired, renewed and let go, and a run asks it before each step.

The heartbeat may renew from a thread of its own (``troth.sdk.heartbeat``), so every read
and write of the bookkeeping holds a lock.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable
from typing import NamedTuple

from troth.sdk.clock import Clock


class HeldTask(NamedTuple):
    """A task as one run holds it: the run's writes are fenced at this version."""

    id: str
    version: int


class Leases:
    """The tasks this process holds, by id, and until when each lease is certainly live."""

    def __init__(self, clock: Clock, *, ttl_ms: int) -> None:
        self._clock = clock
        self.ttl_ms = ttl_ms
        self._versions: dict[str, int] = {}
        self._live_until: dict[str, int] = {}
        self._changed = asyncio.Event()
        self._lock = threading.Lock()

    def hold(self, task: HeldTask, sent: int) -> None:
        """``task`` was acquired (or created held) by a request sent at ``sent``; a run of
        a newer version takes the place of an older one."""
        with self._lock:
            self._versions[task.id] = task.version
            self._live_until[task.id] = sent + self.ttl_ms
        self._changed.set()

    def drop(self, task: HeldTask) -> None:
        """The run of ``task`` has ended; a newer run's lease is kept."""
        with self._lock:
            if self._versions.get(task.id) == task.version:
                del self._versions[task.id]
                del self._live_until[task.id]

    def drives(self, task: HeldTask) -> bool:
        """True while the run of ``task`` is the one this process drives the task with."""
        return self._versions.get(task.id) == task.version

    def lost(self, task: HeldTask) -> str | None:
        """Why the run of ``task`` may no longer hold it, or None while it certainly does."""
        with self._lock:
            if self._versions.get(task.id) != task.version:
                return "is driven by a newer run of this process"
            if self._clock.now() >= self._live_until[task.id]:
                return "may have lapsed (no heartbeat was acknowledged in time)"
            return None

    def renewed(self, tasks: Iterable[HeldTask], sent: int) -> None:
        """A heartbeat for ``tasks`` sent at ``sent`` was acknowledged. It renews a lease
        only if it came back while the lease was certainly live: then the server applied it
        before the lease lapsed, so it extended it."""
        now = self._clock.now()
        with self._lock:
            for task in tasks:
                if self._versions.get(task.id) == task.version and self._live_until[task.id] > now:
                    self._live_until[task.id] = max(self._live_until[task.id], sent + self.ttl_ms)

    def held(self) -> list[HeldTask]:
        """Every task held, at the version of the run that drives it."""
        with self._lock:
            return [HeldTask(id, version) for id, version in self._versions.items()]

    async def any_held(self) -> None:
        """Return once a task is held (at once if one is)."""
        if not self._versions:
            self._changed.clear()
            await self._changed.wait()

    def clear(self) -> None:
        """Forget every lease: the worker has handed its tasks back."""
        with self._lock:
            self._versions.clear()
            self._live_until.clear()
