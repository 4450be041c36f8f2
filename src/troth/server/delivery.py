"""The delivery loop: read the durable outbox, hand messages to their transports, acknowledge.

Redelivery rules (also in docs/delivery.md; each transport's own are in its module):

- The outbox row is the only record of an undelivered message. A row is acknowledged
  (removed) only once its transport delivered it: written to a live poll connection and,
  for an unblock, confirmed (``poll_transport``), or answered 2xx by its HTTP push target
  (``push_transport``). A crash before that leaves the row, and the next server delivers
  it: delivery is at least once, and workers deduplicate by task version.
- Each row goes to the transport registered for its address's scheme (``transport``); the
  loop knows none of them by name. A row whose address no transport serves can never be
  delivered; it is dropped with a warning rather than clog every later pass.
- A newer message with the same key (the outbox is a keyed upsert) replaces the row with a
  new ``seq``; acknowledging the old delivery leaves the new row, which is delivered anew.
- Several servers may share the outbox (PostgreSQL). A server claims a row before
  delivering it (``Outbox.claim``) and others leave a claimed row alone until the claim
  lapses, so one server delivers each message at a time.

When does the loop work? A pass reads a page of the outbox when a commit enqueued a message
(the service's ``outbox_changed``), when a transport says rows were left behind (a poll
connection registered or drained), while the previous page was full, and every
``delivery_interval``. Where rows commit in ``seq`` order (SQLite) a pass reads on from the
last row it has seen, so a pass costs the new rows, not the outbox; elsewhere (PostgreSQL)
it reads the rows this server could deliver now, leaving out claimed ones. A transport's
retries start when it says they are due. With nothing deliverable the loop sleeps: the stuck
rows are neither read nor retried until something changes.

Each delivery is a task of its own, so a slow worker or push target holds up only its own
messages. Acknowledgements are batched: what was delivered since the last pass is removed
in one commit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import secrets
import socket
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import msgspec

from troth.protocol.messages import Execute, MessageHead
from troth.protocol.subjects import message_ids
from troth.server.transport import Transport
from troth.storage.service import Delivery, Outbox

if TYPE_CHECKING:
    from troth.server.metrics import ServerMetrics

log = logging.getLogger(__name__)

_encode = msgspec.json.Encoder().encode


def _scheme(address: str) -> str:
    try:
        return urlsplit(address).scheme
    except ValueError:
        return ""  # no transport's


class DeliveryLoop:
    """Reads the outbox and routes each row to its transport; the ``Courier`` they report to.

    ``groups`` names the poll groups this server holds connections for: the rows of other
    groups are not even read (``troth.storage.reach``).
    """

    def __init__(
        self,
        service: Outbox,
        *,
        server_url: str,
        groups: Callable[[], Collection[str]],
        batch_size: int,
        interval_ms: int,
        claim_ttl_ms: int = 10000,
        metrics: ServerMetrics | None = None,
        now: Callable[[], int] | None = None,
    ) -> None:
        self._service = service
        # The server's clock: an acknowledgement fires the retries that waited for the
        # delivery of their executes at the instant of delivery (``Outbox.ack``).
        self._now = now
        self._metrics = metrics
        self._transports: dict[str, Transport] = {}
        self._groups = groups
        self._execute_head = MessageHead(server_url)
        self._batch = batch_size
        self._interval = interval_ms / 1000
        # Who this server is to the other servers on the outbox, and how long its claims last
        # beyond the delivery they cover.
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self.claim_ttl_ms = claim_ttl_ms
        # Where the next page starts. In seq order (SQLite) it stays at the last row read
        # once a scan is through, so later passes read only new rows; else back to 0.
        self.in_order = service.outbox_in_order
        self._after = 0
        self._rescan = False  # read from the start next pass (rows were left behind)
        self._rescan_later = False  # ... at the next interval (nothing will say when)
        self._wake = asyncio.Event()  # a delivery finished, or rows were left behind
        self._read_now = False  # the next wake-up should read the outbox
        # Rows being delivered, or delivered and waiting for their acknowledgement: a page
        # skips them.
        self._in_hand: set[int] = set()
        self._given_up: list[Delivery] = []  # rows not delivered: claims to give up
        self._delivered: list[Delivery] = []

    def add(self, transport: Transport) -> None:
        """Deliver the rows of ``transport.schemes`` with ``transport``."""
        for scheme in transport.schemes:
            self._transports[scheme] = transport

    # -- the courier: what transports report ------------------------------------------------

    def wire(self, delivery: Delivery) -> bytes:
        """The message JSON as sent: executes carry this server's URL."""
        message = delivery.message
        if isinstance(message, Execute):
            message = msgspec.structs.replace(message, head=self._execute_head)
        return _encode(message)

    async def claim(self, deliveries: list[Delivery], ttl_ms: int) -> list[Delivery]:
        """The deliveries this server may make now (others may hold some of them)."""
        if not deliveries:
            return []
        return await self._service.claim(deliveries, self.holder, ttl_ms)

    def take(self, delivery: Delivery) -> None:
        self._in_hand.add(delivery.seq)

    def delivered(self, delivery: Delivery) -> None:
        if self._metrics is not None:
            self._metrics.message(self._transport_name(delivery), "delivered")
        self._remove(delivery)

    def give_up(self, delivery: Delivery) -> None:
        if self._metrics is not None:
            self._metrics.message(self._transport_name(delivery), "failed")
        self._given_up.append(delivery)
        self._in_hand.discard(delivery.seq)

    def _remove(self, delivery: Delivery) -> None:
        """Remove the row with the next acknowledgement."""
        self._in_hand.add(delivery.seq)  # until acknowledged
        self._delivered.append(delivery)

    def _transport_name(self, delivery: Delivery) -> str:
        transport = self._transports.get(_scheme(delivery.address))
        return "none" if transport is None else transport.name

    def wake(self) -> None:
        self._wake.set()

    def read_again(self, *, now: bool) -> None:
        if now:
            self._rescan = True
            self._read_now = True
            self._wake.set()
        else:
            self._rescan_later = True

    # -- the loop ---------------------------------------------------------------------------

    async def run(self) -> None:
        changed = self._service.outbox_changed()
        loop = asyncio.get_running_loop()
        last_read = -math.inf
        read = True
        while True:
            more = False
            try:
                if read:
                    changed.clear()  # before reading: a commit during the pass makes another
                    self._read_now = False
                    last_read = loop.time()
                    more = await self.deliver_once()
                else:
                    await self._acknowledge()
                self._wake.clear()
                await self._dispatch()
            except Exception:
                log.exception("delivery pass failed")
            if more:
                await asyncio.sleep(0)
                continue
            read = await self._sleep(changed, last_read + self._interval)
            if read and not changed.is_set() and not self._read_now and self._rescan_later:
                # The interval's pass: read again what was left behind with no one to say so.
                self._rescan_later = False
                self._rescan = True

    async def _sleep(self, changed: asyncio.Event, read_at: float) -> bool:
        """Wait for something to do; whether the outbox should be read."""
        if changed.is_set() or self._read_now:
            return True
        if self._wake.is_set():
            return False
        loop = asyncio.get_running_loop()
        until = min([read_at, *(t.next_due() for t in self._unique_transports())])
        waits = [asyncio.ensure_future(changed.wait()), asyncio.ensure_future(self._wake.wait())]
        try:
            await asyncio.wait(
                waits, timeout=max(0.0, until - loop.time()), return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for wait in waits:
                wait.cancel()
        return changed.is_set() or self._read_now or loop.time() >= read_at

    async def deliver_once(self) -> bool:
        """Read and deliver one page; True when the outbox may hold more after it."""
        await self._acknowledge()
        if self._rescan:
            self._rescan = False
            self._after = 0
        # In seq order, a short page has shown every row up to the end asked for before it
        # that this server can take: the rest are other groups' (``groups``), left for a
        # connection to come (which reads from the start again). So the next pass reads on
        # from that end, and a backlog no connection here can take is not scanned again.
        end = await self._service.last_seq() if self.in_order else 0
        rows = await self._service.undelivered(
            self._batch, after=self._after, groups=self._groups()
        )
        full = len(rows) >= self._batch
        if rows and (full or self.in_order):
            self._after = rows[-1].seq
        elif not self.in_order:
            self._after = 0
        if self.in_order and not full:
            self._after = max(self._after, end)
        offers: dict[Transport, list[Delivery]] = {}
        undeliverable = []
        for delivery in rows:
            if delivery.seq in self._in_hand:
                continue
            transport = self._transports.get(_scheme(delivery.address))
            if transport is None:
                undeliverable.append(delivery)
            else:
                offers.setdefault(transport, []).append(delivery)
        for transport, offered in offers.items():
            if self._metrics is not None:
                for delivery in offered:
                    self._metrics.message(transport.name, "enqueued", delivery.message.kind)
            undeliverable += await transport.offer(offered)
        for delivery in undeliverable:
            ids = message_ids(delivery.message)
            log.warning(
                "dropping the %s of %s to undeliverable address %r",
                delivery.message.kind,
                next(iter(ids.values())),
                delivery.address,
                extra=ids,
            )
            if self._metrics is not None:
                self._metrics.dropped()
            self._remove(delivery)
        await self._acknowledge()
        return full

    async def _dispatch(self) -> None:
        for transport in self._unique_transports():
            await transport.dispatch()

    def _unique_transports(self) -> list[Transport]:
        return list(dict.fromkeys(self._transports.values()))

    # -- acknowledgement and shutdown ----------------------------------------------------------

    async def _acknowledge(self) -> None:
        """Remove delivered rows from the outbox, and give up the claims on rows that were
        not delivered."""
        if self._given_up:
            given_up, self._given_up = self._given_up, []
            try:
                await self.claim(given_up, 0)
            except Exception:
                # The claims lapse on their own; other servers just wait a little longer.
                log.exception("giving up %d claims failed", len(given_up))
        if not self._delivered:
            return
        deliveries, self._delivered = self._delivered, []
        try:
            await self._service.ack(deliveries, None if self._now is None else self._now())
        except Exception:
            # Delivered but still in the outbox: it will be delivered again (at least once).
            log.exception("acknowledging %d deliveries failed", len(deliveries))
            self._rescan_later = True
        self._in_hand.difference_update(d.seq for d in deliveries)

    async def stop(self) -> None:
        """Cancel deliveries in flight and acknowledge what was already delivered."""
        for transport in self._unique_transports():
            await transport.stop()
        with contextlib.suppress(Exception):
            await self._acknowledge()
