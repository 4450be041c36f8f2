"""Embedded mode: the engine in this process, on SQLite, behind the ``Network`` seam.

Requests go through the same validation as the server's (``troth.protocol.kinds``) and
then straight to ``Service.handle``. Two loops stand in for the server's background work:
the timeouts loop fires due timeouts (promise deadlines, leases, retries, schedules) with
``fire_due``, and the delivery loop hands outbox messages to this process's worker and
acknowledges them. With one process there is one worker, so every poll address (any
group) is delivered here; HTTP push targets are not served in embedded mode.

Because the state lives in a SQLite file, a process killed mid-workflow and started again
finds its tasks where they were: their leases lapse, the timeouts loop re-dispatches them,
and the worker replays them from their recorded steps.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from troth.protocol.addresses import parse_poll
from troth.protocol.envelope import Request
from troth.protocol.kinds import KINDS
from troth.protocol.requests import Data
from troth.protocol.responses import ExecuteData, Reply, TaskFenceResult, UnblockData
from troth.sdk.clock import Clock, WallClock
from troth.sdk.network import (
    Execute,
    Incoming,
    OnConnect,
    OnMessage,
    Unblock,
    corr_id,
    error_message,
    fence_reply,
)
from troth.storage.service import Delivery, Service

log = logging.getLogger("troth.sdk")

_BATCH = 100

# After a request wakes the timeouts loop, it waits this long (s) before reading the next
# deadline again, so a burst of requests costs one read rather than one each (a read is a
# thread hop and a query: measured at an eighth of the loop's time under load). A deadline
# a request armed closer than this fires at most this late; virtual time waits for none.
_COALESCE = 0.005


class LocalNetwork:
    def __init__(self, service: Service, clock: Clock, group: str, pid: str) -> None:
        self.service = service
        self.clock = clock
        self.group = group
        self.pid = pid
        self._poke = asyncio.Event()
        self._coalesce = _COALESCE if isinstance(clock, WallClock) else 0.0
        self._loops: list[asyncio.Task[None]] = []
        self._on_message: OnMessage | None = None
        # Operations started so far and operations in flight: how virtual time
        # (``troth.testing``) tells that the engine has nothing left to do at this instant.
        self.activity = 0
        self.busy = 0

    @contextlib.asynccontextmanager
    async def _working(self) -> AsyncIterator[None]:
        self.activity += 1
        self.busy += 1
        try:
            yield
        finally:
            self.busy -= 1

    def quiet(self) -> bool:
        """Nothing in flight and no undelivered message announced."""
        return self.busy == 0 and not self.service.outbox_changed().is_set()

    async def send(self, kind: str, data: Data) -> Reply:
        spec = KINDS[kind]
        if spec.validate is not None and (errors := spec.validate(data)):
            return Reply(400, "; ".join(errors))
        async with self._working():
            reply = await self.service.handle(Request(kind, corr_id(), data), self.clock.now())
        status, body = reply
        self._poke.set()  # the request may have armed an earlier deadline
        if status not in (200, 300):
            return Reply(status, error_message(kind, status, body))
        if isinstance(body, TaskFenceResult):
            body = fence_reply(body)
        return Reply(status, body)

    async def start(self, on_message: OnMessage, on_connect: OnConnect) -> None:
        self._on_message = on_message
        self._loops = [
            asyncio.create_task(self._deliver(), name="troth-embedded-delivery"),
            asyncio.create_task(self._fire_timeouts(), name="troth-embedded-timeouts"),
        ]
        await on_connect()

    async def stop(self) -> None:
        for loop in self._loops:
            loop.cancel()
        for loop in self._loops:
            with contextlib.suppress(asyncio.CancelledError):
                await loop
        self._loops = []

    async def tick(self) -> int:
        """Fire every timeout due now; what the timeouts loop does when it wakes."""
        async with self._working():
            return await self.service.fire_due(self.clock.now())

    async def _fire_timeouts(self) -> None:
        while True:
            try:
                self._poke.clear()
                async with self._working():
                    deadline = await self.service.next_deadline()
                if deadline is not None and deadline <= self.clock.now():
                    await self.tick()
                    continue
                await self._wait(deadline)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("embedded timeouts loop failed; retrying in 1 s")
                await asyncio.sleep(1)

    async def _wait(self, deadline: int | None) -> None:
        """Until the deadline, or until a request may have changed it."""
        waits = [asyncio.ensure_future(self._poke.wait())]
        if deadline is not None:
            waits.append(
                asyncio.ensure_future(self.clock.sleep((deadline - self.clock.now()) / 1000))
            )
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
        if self._coalesce and self._poke.is_set():
            await asyncio.sleep(self._coalesce)

    async def _deliver(self) -> None:
        changed = self.service.outbox_changed()
        while True:
            try:
                async with self._working():
                    changed.clear()
                    batch = await self.service.outbox(_BATCH)
                    for delivery in batch:
                        message = _incoming(delivery)
                        if message is not None and self._on_message is not None:
                            self._on_message(message)
                    if batch:
                        await self.service.ack(batch)
                if not batch:
                    await changed.wait()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("embedded delivery loop failed; retrying in 1 s")
                await asyncio.sleep(1)


def _incoming(delivery: Delivery) -> Incoming | None:
    if parse_poll(delivery.address) is None:
        log.warning("embedded mode delivers only to poll addresses; dropped %s", delivery.address)
        return None
    data = delivery.message.data
    if isinstance(data, ExecuteData):
        return Execute(data.task.id, data.task.version)
    if isinstance(data, UnblockData):
        return Unblock(data.promise)
    return None
