"""The poll transport: outbox messages to ``poll://`` addresses, over workers' SSE streams.

- A message counts as delivered once its frame was written to a live connection
  (``PollHub.deliver``). An execute that is lost after that comes back through its task's
  retry; an unblock, which nothing else re-sends, must also be confirmed by its stream
  (acknowledged, or the stream outlived ``unblock_hold_ms``); one whose stream ends first
  is delivered again at once.
- A message with no connection that will take it stays in the outbox. A server reads only
  the messages of groups it holds connections for (``troth.storage.reach``; the loop asks
  ``PollHub.groups``), and reads again what it left behind when a connection registers or
  drains.
- A server claims a poll message only while it holds a connection that may take it, for
  the write and the unblock's confirmation; one that no connection took is given up at
  once, since another server may hold a connection that takes it.

A page's writes take microseconds: the page waits briefly for them, so that the loop
acknowledges them together in one commit.
"""

from __future__ import annotations

import asyncio

from troth.protocol.addresses import PollAddress, parse_poll
from troth.protocol.messages import Unblock
from troth.server.poll import Outcome, PollHub
from troth.server.transport import Courier
from troth.storage.service import Delivery

_ACK_GRACE = 0.05  # seconds a page waits for its poll writes, to acknowledge them together


class PollTransport:
    name = "poll"
    schemes: tuple[str, ...] = ("poll",)

    def __init__(self, hub: PollHub, courier: Courier, *, unblock_hold_ms: int) -> None:
        self._hub = hub
        self._courier = courier
        # An unblock stays this server's while its stream confirms it (``PollHub.deliver``).
        self._hold = unblock_hold_ms / 1000
        self._claim_ttl = courier.claim_ttl_ms + unblock_hold_ms
        self._polls: set[asyncio.Task[None]] = set()
        self._collecting = False  # a page is waiting for its writes
        hub.subscribe(on_connect=self._left_behind, on_drain=self._left_behind)

    def _left_behind(self) -> None:
        """A connection registered or drained: rows left behind may go now."""
        self._courier.read_again(now=True)

    async def offer(self, rows: list[Delivery]) -> list[Delivery]:
        to_poll: dict[int, PollAddress] = {}
        undeliverable = []
        for delivery in rows:
            address = parse_poll(delivery.address)
            if address is None:
                undeliverable.append(delivery)
            elif self._hub.reachable(address):
                to_poll[delivery.seq] = address
            # Else a server without a connection for it leaves it to the servers that have
            # one. It is read again when a connection that may take it registers.
        claimed = await self._courier.claim([d for d in rows if d.seq in to_poll], self._claim_ttl)
        polls = [self._start(delivery, to_poll[delivery.seq]) for delivery in claimed]
        if polls:
            self._collecting = True
            try:
                await asyncio.wait(polls, timeout=_ACK_GRACE)
            finally:
                self._collecting = False
        return undeliverable

    async def dispatch(self) -> None:
        pass  # every delivery starts when its row is read

    def next_due(self) -> float:
        return float("inf")

    def _start(self, delivery: Delivery, address: PollAddress) -> asyncio.Task[None]:
        self._courier.take(delivery)
        task = asyncio.create_task(self._deliver(delivery, address))
        self._polls.add(task)
        task.add_done_callback(self._polls.discard)
        return task

    async def _deliver(self, delivery: Delivery, address: PollAddress) -> None:
        # An execute counts once written: a lost one comes back through the task's retry.
        # Nothing re-sends an unblock, so it counts only once its stream confirms it.
        hold = self._hold if isinstance(delivery.message, Unblock) else None
        outcome = Outcome.NOT_TAKEN
        try:
            outcome = await self._hub.deliver(address, self._courier.wire(delivery), hold)
        finally:
            if outcome is Outcome.DELIVERED:
                self._courier.delivered(delivery)
                if not self._collecting:
                    self._courier.wake()  # its page has already acknowledged: acknowledge soon
            else:
                # Another server may hold a connection that takes it: let go at once. This
                # one reads it again when a connection registers or drains, or at the latest
                # at the next interval.
                self._courier.give_up(delivery)
                # LOST: look for a connection now, perhaps it reconnected.
                self._courier.read_again(now=outcome is Outcome.LOST)

    async def stop(self) -> None:
        tasks = list(self._polls)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
