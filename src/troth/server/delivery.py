"""The delivery loop: read the durable outbox, hand messages to workers, acknowledge.

Redelivery rules (also in docs/delivery.md):

- The outbox row is the only record of an undelivered message. A row is acknowledged
  (removed) only once its frame was written to a live poll connection, or its HTTP push
  target answered 2xx. A crash before that leaves the row, and the next server delivers it:
  delivery is at least once, and workers deduplicate by task version.
- A poll message with no connection that will take it stays in the outbox; it is tried
  again on every pass, and a pass runs as soon as a connection registers.
- A push message gets a delivery round of ``push_retries`` attempts with exponential
  backoff. When the round fails, the row stays and is left alone for a further backoff
  (continuing the doubling, capped at ``push_backoff_max``) before the next round; this
  repeats until the target answers or the row is superseded. Independently of this, the
  machine re-enqueues an execute for a still-pending task every ``tasks_retry_timeout``.
- A newer message with the same key (the outbox is a keyed upsert) replaces the row with a
  new ``seq``; acknowledging the old delivery leaves the new row, which is delivered anew.
- A row whose address no transport serves can never be delivered; it is dropped with a
  warning rather than clog every later pass.
- Several servers may share the outbox (PostgreSQL). A server claims a row before
  delivering it (``Service.claim``) and others leave a claimed row alone until the claim
  lapses, so one server delivers each message at a time. A server claims a poll message
  only while it holds a connection that may take it, and a push message always. A poll
  message that no connection took is given up at once; a push message whose round failed
  stays claimed through its backoff, so the retries keep their pace whatever the number
  of servers.

Each message is delivered by a task of its own, so one slow worker or push target holds up
only its own messages. A pass runs when the service signals that a commit enqueued a
message, when a poll connection registers, when a delivery finishes after its pass, and
every ``delivery_interval`` otherwise. Acknowledgements are batched: a pass waits briefly
for its poll writes (they take microseconds) and acknowledges them in one commit. Rows a
pass leaves in the outbox (no connection, in flight, backing off) make the next pass read
that much further, so stuck rows at the head of the outbox never hide newer ones.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
from collections.abc import Coroutine
from typing import Any

import msgspec

from troth.protocol.addresses import PollAddress, is_http, parse_poll
from troth.protocol.responses import ExecuteHead
from troth.server.poll import PollHub
from troth.server.push import Pusher
from troth.server.sse import frame
from troth.storage.service import Delivery, Service

log = logging.getLogger("troth.delivery")

_encode = msgspec.json.Encoder().encode

_ACK_GRACE = 0.05  # seconds a pass waits for its poll writes, to acknowledge them together


class DeliveryLoop:
    def __init__(
        self,
        service: Service,
        hub: PollHub,
        pusher: Pusher,
        server_url: str,
        batch_size: int,
        interval_ms: int,
        claim_ttl_ms: int = 10000,
    ) -> None:
        self._service = service
        self._hub = hub
        self._pusher = pusher
        self._execute_head = ExecuteHead(server_url)
        self._batch = batch_size
        self._limit = batch_size  # rows the next pass reads
        self._interval = interval_ms / 1000
        # Who this server is to the other servers on the outbox, and how long its claims last;
        # a push claim also covers a whole round, so a slow target is not pushed twice.
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self._claim_ttl = claim_ttl_ms
        self._push_ttl = claim_ttl_ms + round(pusher.round_time() * 1000)
        self._given_up: list[Delivery] = []  # poll rows no connection took: claims to give up
        # Rows being delivered, or delivered and waiting for their acknowledgement.
        self._busy: set[int] = set()
        self._delivered: list[Delivery] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._collecting = False  # a pass is waiting for its poll writes
        # seq -> (loop time before which not to push again, failed rounds so far)
        self._backoff: dict[int, tuple[float, int]] = {}

    def wire(self, delivery: Delivery) -> bytes:
        """The message JSON as sent: executes carry this server's URL."""
        message = delivery.message
        if message.kind == "execute":
            message = msgspec.structs.replace(message, head=self._execute_head)
        return _encode(message)

    async def run(self) -> None:
        changed = self._service.outbox_changed()
        while True:
            changed.clear()  # before reading, so a commit during the pass triggers another
            try:
                more = await self.deliver_once()
            except Exception:
                log.exception("delivery pass failed")
                more = False
            if more:
                await asyncio.sleep(0)
                continue
            try:
                async with asyncio.timeout(self._interval):
                    await changed.wait()
            except TimeoutError:
                pass

    async def deliver_once(self) -> bool:
        """One pass; True when the outbox may hold more than this pass could read."""
        await self._acknowledge()
        limit = self._limit
        rows = await self._service.outbox(limit)
        now = asyncio.get_running_loop().time()
        to_poll: dict[int, PollAddress] = {}
        to_push: list[Delivery] = []
        for delivery in rows:
            if delivery.seq in self._busy or self._backoff.get(delivery.seq, (0.0,))[0] > now:
                continue
            if (address := parse_poll(delivery.address)) is not None:
                # A server without a connection for it leaves it to the servers that have one.
                if self._hub.reachable(address):
                    to_poll[delivery.seq] = address
            elif is_http(delivery.address):
                to_push.append(delivery)
            else:
                log.warning("dropping message to undeliverable address %r", delivery.address)
                self._busy.add(delivery.seq)
                self._delivered.append(delivery)
        polls = [
            self._start(delivery, self._poll(delivery, to_poll[delivery.seq]))
            for delivery in await self._claim(
                [d for d in rows if d.seq in to_poll], self._claim_ttl
            )
        ]
        for delivery in await self._claim(to_push, self._push_ttl):
            self._start(delivery, self._push(delivery))
        if polls:
            self._collecting = True
            try:
                await asyncio.wait(polls, timeout=_ACK_GRACE)
            finally:
                self._collecting = False
        acked = await self._acknowledge()
        remaining = len(rows) - len(acked & {d.seq for d in rows})
        if len(rows) < limit:
            self._forget_except({d.seq for d in rows})
            self._limit = self._batch + remaining
            return False
        # A full read: more rows may follow. When none of these could go, read twice as far.
        self._limit = self._batch + remaining if remaining < len(rows) else 2 * limit
        return True

    async def _claim(self, deliveries: list[Delivery], ttl: int) -> list[Delivery]:
        """The deliveries this server may make now (others may hold some of them)."""
        if not deliveries:
            return []
        return await self._service.claim(deliveries, self.holder, ttl)

    def _start(self, delivery: Delivery, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        self._busy.add(delivery.seq)
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _done(self, delivery: Delivery, delivered: bool) -> None:
        if delivered:
            self._delivered.append(delivery)
            if not self._collecting:
                # Its pass has already acknowledged; the next one should come soon.
                self._service.outbox_changed().set()
        else:
            self._busy.discard(delivery.seq)

    async def _poll(self, delivery: Delivery, address: PollAddress) -> None:
        delivered = False
        try:
            delivered = await self._hub.deliver(address, frame(self.wire(delivery)))
        finally:
            if not delivered:
                # Another server may hold a connection that takes it: let go at once.
                self._given_up.append(delivery)
            self._done(delivery, delivered)

    async def _push(self, delivery: Delivery) -> None:
        delivered = False
        try:
            delivered = await self._pusher.push(delivery.address, self.wire(delivery))
        except Exception:
            log.exception("push to %s failed", delivery.address)
        finally:
            self._done(delivery, delivered)
        if delivered:
            self._backoff.pop(delivery.seq, None)
            return
        rounds = self._backoff.get(delivery.seq, (0.0, 0))[1] + 1
        wait = self._pusher.backoff(self._pusher.retries + rounds)
        self._backoff[delivery.seq] = (asyncio.get_running_loop().time() + wait, rounds)
        try:
            # Hold the row through the backoff: the next round is this server's to make.
            await self._claim([delivery], self._claim_ttl + round(wait * 1000))
        except Exception:
            log.exception("extending the claim on a push to %s failed", delivery.address)
        log.warning(
            "push to %s failed %d round(s); next round in %.1fs", delivery.address, rounds, wait
        )

    async def _acknowledge(self) -> set[int]:
        """Remove delivered rows from the outbox, and give up the claims on poll rows that
        no connection took; the seqs acknowledged."""
        if self._given_up:
            given_up, self._given_up = self._given_up, []
            try:
                await self._claim(given_up, 0)
            except Exception:
                # The claims lapse on their own; other servers just wait a little longer.
                log.exception("giving up %d claims failed", len(given_up))
        if not self._delivered:
            return set()
        deliveries, self._delivered = self._delivered, []
        seqs = {d.seq for d in deliveries}
        try:
            await self._service.ack(deliveries)
        except Exception:
            # Delivered but still in the outbox: it will be delivered again (at least once).
            log.exception("acknowledging %d deliveries failed", len(deliveries))
            seqs = set()
        self._busy.difference_update(d.seq for d in deliveries)
        return seqs

    def _forget_except(self, seqs: set[int]) -> None:
        """Drop backoff state of rows no longer in the outbox (acked elsewhere, superseded)."""
        for seq in [s for s in self._backoff if s not in seqs]:
            del self._backoff[seq]

    async def stop(self) -> None:
        """Cancel deliveries in flight and acknowledge what was already delivered."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._acknowledge()
