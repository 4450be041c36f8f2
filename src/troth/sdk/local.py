"""Embedded mode: the engine in this process, on SQLite, behind the ``Network`` seam.

Every request's data is checked by the server's own decoder (``decode_data``, the part of
``decode_request`` after the envelope, which is ours here) before it reaches
``Service.handle``, so embedded mode refuses exactly what a server refuses, with the same
400 message; a storage failure answers 500 as the server would, so user code sees
``ServerError`` rather than a raw ``sqlite3`` exception. What comes back is what a server
answers; the SDK's fences go through ``task.fences``, whose replies carry no preload (a run
learns its own writes from them, and what others settle from a claim's or a suspend's).

Three loops stand in for the server's background work: the timeouts loop (the server's
own, ``troth.storage.timeouts_loop``) fires due timeouts (promise deadlines, leases,
retries, schedules) on the app's clock; the delivery loop hands
outbox messages to this process's worker and acknowledges them; the watch loop notices
commits by *other processes* on the same file (another app, a script settling a promise)
and wakes the other two. Delivery takes every anycast message (any group: one process
serves them all; one that prefers another process is first left to it for a moment) and the
unicast messages addressed to this process; unicast messages for another process on the
file stay in the outbox for it. HTTP push targets are not served.

Because the state lives in a SQLite file, a process killed mid-workflow and started again
finds its tasks where they were. If it is the only process using the file, it takes them
back at once (``SqliteService.recover_abandoned``); otherwise their leases lapse, the
timeouts loop re-dispatches them, and a worker replays them from their recorded steps.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator

import msgspec

from troth.protocol.addresses import parse_poll
from troth.protocol.envelope import BadRequest, Envelope, decode_data, error_text
from troth.protocol.kinds import Kind
from troth.protocol.messages import Message
from troth.protocol.requests import Data
from troth.protocol.responses import Reply
from troth.sdk.clock import Clock, WallClock
from troth.sdk.network import Network, OnConnect, OnMessage, corr_id
from troth.storage.service import Delivery
from troth.storage.sqlite import SqliteService
from troth.storage.timeouts_loop import TimeoutsLoop
from troth.views.executions import ExecutionQuery, Page

log = logging.getLogger(__name__)

_json = msgspec.json.Encoder()

_BATCH = 100

# After a commit wakes the timeouts loop (it armed a deadline earlier than the one the loop
# awaits), the loop waits this long (ms) before reading the next deadline again, so a burst
# of requests costs one read rather than one each (a read is a thread hop and a query:
# measured at an eighth of the loop's time under load). A deadline a request armed closer
# than this fires at most this late; virtual time waits for none.
_COALESCE_MS = 5

# How often (s) the watch loop asks whether another process has committed to the file: a
# promise settled elsewhere resumes its waiters here within about this long.
_WATCH = 0.1

# How long (s) an anycast message that prefers another process is left to it: a few of
# its watch periods.
_PREFERENCE = 0.3


class LocalNetwork(Network):
    def __init__(self, service: SqliteService, clock: Clock, group: str, pid: str) -> None:
        self.service = service
        self.clock = clock
        self.group = group
        self.pid = pid
        # No max_sleep: the watch loop pokes it when another process commits.
        self._timeouts = TimeoutsLoop(
            _CountedTimers(self),
            now=clock.now,
            sleep=clock.sleep,
            coalesce_ms=_COALESCE_MS if isinstance(clock, WallClock) else 0,
        )
        # On the wall clock a commit wakes the loop only if it armed a deadline before the
        # one the loop awaits. Virtual time jumps to that deadline, though, so there the
        # loop looks again after every request: one disarmed meanwhile must not move it.
        self._poke_always = not isinstance(clock, WallClock)
        if not self._poke_always:
            service.on_armed = self._timeouts.poke
        # Virtual time is one process's: nobody else would take a message left to them.
        self._preference = _PREFERENCE if isinstance(clock, WallClock) else 0.0
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

    async def send(self, kind: Kind, data: Data) -> Reply:
        try:
            # The request's data as a server would read it off the wire: one set of rules
            # for both. The envelope around it is ours and always sound, so it is left out.
            request = decode_data(Envelope(kind, corr_id(), _json.encode(data)))
        except BadRequest as error:
            return error.reply()
        try:
            async with self._working():
                reply = await self.service.handle(request, self.clock.now())
        except Exception as error:
            # What the server answers for an infrastructure failure (``troth.server.rpc``).
            log.exception("embedded %s failed", kind)
            return Reply(500, f"Internal error: {error}")
        status, body = reply
        if self._poke_always:
            self._timeouts.poke()
        if status not in (200, 300):
            # The message a server's envelope would carry.
            return Reply(status, error_text(kind, status, body))
        return reply

    async def start(self, on_message: OnMessage, on_connect: OnConnect) -> None:
        self._on_message = on_message
        try:
            if await self.service.recover_abandoned(self.pid, self.clock.now()):
                log.info("no other process uses %s: took back its dead tasks", self.service.path)
        except Exception:
            # Only a shortcut: without it the dead holders' leases lapse in their own time.
            log.warning("embedded recovery failed; leases will lapse instead", exc_info=True)
        self._loops = [
            asyncio.create_task(self._deliver(), name="troth-embedded-delivery"),
            asyncio.create_task(self._timeouts.run(), name="troth-embedded-timeouts"),
        ]
        if isinstance(self.clock, WallClock):
            # Virtual time (``troth.testing``) is one process's by construction.
            self._loops.append(asyncio.create_task(self._watch(), name="troth-embedded-watch"))
        await on_connect()

    async def executions(self, query: ExecutionQuery) -> Page:
        return await self.service.executions(query)

    async def stop(self) -> None:
        for loop in self._loops:
            loop.cancel()
        for loop in self._loops:
            with contextlib.suppress(asyncio.CancelledError):
                await loop
        self._loops = []

    async def _deliver(self) -> None:
        changed = self.service.outbox_changed()
        # Every row up to this seq has been read: ours delivered and acknowledged, other
        # processes' left in place. Reading on from it never meets those again, so rows
        # left for a live process cost nothing, however long they wait.
        seen = 0
        # Anycast messages that prefer another process, by seq: when they may be taken here.
        waiting: dict[int, float] = {}
        while True:
            try:
                async with self._working():
                    changed.clear()
                    now = time.monotonic()
                    due = {seq for seq, at in waiting.items() if at <= now}
                    for seq in due:
                        del waiting[seq]
                    if due:
                        seen = min(seen, min(due) - 1)  # read them again, if still there
                    batch = await self.service.undelivered(_BATCH, after=seen)
                    ours = [d for d in batch if self._takes(d, waiting, due, now)]
                    for delivery in ours:
                        message = _incoming(delivery)
                        if message is not None and self._on_message is not None:
                            self._on_message(message)
                    if ours:
                        await self.service.ack(ours)
                    if batch:
                        seen = max(seen, batch[-1].seq)
                if len(batch) < _BATCH:
                    wake = min(waiting.values(), default=None)
                    timeout = None if wake is None else max(0.0, wake - time.monotonic())
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(changed.wait(), timeout)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("embedded delivery loop failed; retrying in 1 s")
                await asyncio.sleep(1)

    def _takes(
        self, delivery: Delivery, waiting: dict[int, float], due: set[int], now: float
    ) -> bool:
        """Whether this process takes ``delivery`` now (see the module docstring).

        An anycast message that prefers another process (a workflow that process started,
        resumed) is left to it for a moment, as a server would send it there: a process
        that merely settled the promise and exits may not swallow it. If it is still there
        after ``_PREFERENCE``, its process is gone or busy, and this one takes it.
        """
        poll = parse_poll(delivery.address)
        if poll is None:
            return True  # undeliverable here: ``_incoming`` drops it
        if poll.cast == "uni":
            return poll.id == self.pid
        if poll.id in (None, self.pid) or delivery.seq in due or not self._preference:
            return True
        waiting.setdefault(delivery.seq, now + self._preference)
        return False

    async def _watch(self) -> None:
        """Wake delivery and the timeouts loop when another process commits to the file.

        Asks SQLite a header question a few times a second rather than reading any table:
        a commit elsewhere may have enqueued a message for this process (a resumed task, an
        unblock) or armed an earlier deadline.
        """
        while True:
            await asyncio.sleep(_WATCH)
            try:
                if await self.service.committed_elsewhere():
                    self.service.outbox_changed().set()
                    self._timeouts.poke()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("embedded watch loop failed; retrying in 1 s")
                await asyncio.sleep(1)


class _CountedTimers:
    """The service's timers, each call counted as the network's work: virtual time
    (``troth.testing``) waits for a firing to finish before it moves on."""

    def __init__(self, network: LocalNetwork) -> None:
        self._network = network

    async def fire_due(self, now: int) -> int:
        async with self._network._working():
            return await self._network.service.fire_due(now)

    async def next_deadline(self) -> int | None:
        async with self._network._working():
            return await self._network.service.next_deadline()


def _incoming(delivery: Delivery) -> Message | None:
    if parse_poll(delivery.address) is None:
        log.warning("embedded mode delivers only to poll addresses; dropped %s", delivery.address)
        return None
    return delivery.message
