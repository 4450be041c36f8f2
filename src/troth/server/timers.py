"""The timers the server's timeouts loop drives: the service's, deferring idle retries.

A retry whose execute still waits in the outbox would only rewrite that message and move
its own deadline (``troth.engine.timeouts.defer_idle_retry``). The server's loop defers
such retries, so a backlog that no worker can take costs it nothing per retry period; the
delivery of the message fires the retry (``Outbox.ack`` with ``now``). ``debug.tick`` goes
to the service directly and fires everything due, as Lean does; embedded mode's loop does
not defer either (its deliveries do not say when they happened).
"""

from __future__ import annotations

from troth.storage.service import Sweeps


class DeferringTimers:
    """``Timers`` over ``service``, passing deferred retries by."""

    def __init__(self, service: Sweeps) -> None:
        self._service = service

    async def fire_due(self, now: int) -> int:
        return await self._service.fire_due(now, defer_idle=True)

    async def next_deadline(self) -> int | None:
        return await self._service.next_deadline(defer_idle=True)
