"""The delivery loop: read the durable outbox, hand messages to workers, acknowledge.

Redelivery rules (also in docs/delivery.md):

- The outbox row is the only record of an undelivered message. A row is acknowledged
  (removed) only once its frame was written to a live poll connection, or its HTTP push
  target answered 2xx. An unblock, which nothing else re-sends, must also be confirmed by
  its stream (acknowledged, or the stream outlived ``unblock_hold``; ``PollHub.deliver``);
  one whose stream ends first is delivered again at once. A crash before that leaves the
  row, and the next server delivers it: delivery is at least once, and workers deduplicate
  by task version.
- A poll message with no connection that will take it stays in the outbox. A server does
  not even read the messages of groups it holds no connection for (``troth.storage.reach``),
  and reads again what it left behind when a connection registers or drains.
- A push message is tracked by its outbox key, not its ``seq``: one round in flight per key,
  and its backoff survives the row being rewritten (a task retry re-sends its execute every
  ``tasks_retry_timeout``). A failed round of ``push_retries`` attempts leaves the row for a
  further backoff (doubling, capped at ``push_backoff_max``); this repeats until the target
  answers or the row is gone. At most ``push_concurrency`` rounds run at once.
- A target (push address) whose rounds fail ``BREAK_AFTER`` times in a row is paused: no
  round to it starts until its pause ends, the pause doubling with each failed probe. Then
  one round probes it; success releases every message waiting for it.
- A newer message with the same key (the outbox is a keyed upsert) replaces the row with a
  new ``seq``; acknowledging the old delivery leaves the new row, which is delivered anew.
- A row whose address no transport serves can never be delivered; it is dropped with a
  warning rather than clog every later pass.
- Several servers may share the outbox (PostgreSQL). A server claims a row before
  delivering it (``Outbox.claim``) and others leave a claimed row alone until the claim
  lapses, so one server delivers each message at a time. A server claims a poll message
  only while it holds a connection that may take it, and a push message always. A poll
  message that no connection took is given up at once; a push message whose round failed
  stays claimed through its backoff, so the retries keep their pace whatever the number
  of servers.

When does the loop work? A pass reads a page of the outbox when a commit enqueued a message
(the service's ``outbox_changed``), when a connection registers or drains, while the
previous page was full, and every ``delivery_interval``. Where rows commit in ``seq`` order
(SQLite) a pass reads on from the last row it has seen, so a pass costs the new rows, not
the outbox; elsewhere (PostgreSQL) it reads the rows this server could deliver now, leaving
out claimed ones. Push rounds start when their backoff ends. With nothing deliverable the
loop sleeps: the stuck rows are neither read nor retried until something changes.

Each delivery is a task of its own, so a slow worker or push target holds up only its own
messages. Acknowledgements are batched: a pass waits briefly for its poll writes (they take
microseconds) and acknowledges them in one commit. Push failures are logged in summary:
one line per failing target per ``LOG_EVERY`` seconds (at most ``LOG_TARGETS`` targets),
and one line with the totals.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import math
import os
import secrets
import socket

import msgspec

from troth.engine import OutboxKey, outbox_key
from troth.protocol.addresses import PollAddress, is_http, parse_poll
from troth.protocol.responses import ExecuteHead
from troth.server.poll import Outcome as PollOutcome
from troth.server.poll import PollHub
from troth.server.push import Outcome, Pusher
from troth.storage.service import Delivery, Outbox

log = logging.getLogger(__name__)

_encode = msgspec.json.Encoder().encode

_ACK_GRACE = 0.05  # seconds a pass waits for its poll writes, to acknowledge them together

BREAK_AFTER = 3  # failed rounds in a row that pause a target
LOG_EVERY = 10.0  # seconds between summaries of push failures
LOG_TARGETS = 10  # failing targets named per summary; the rest are only counted


class _Push:
    """A push message, by outbox key: the newest row read for it, and its backoff."""

    __slots__ = ("busy", "delivery", "due", "failures", "key", "missed")

    def __init__(self, key: OutboxKey, delivery: Delivery, due: float) -> None:
        self.key = key
        self.delivery = delivery
        self.due = due  # loop time its next round may start; inf while parked
        self.failures = 0  # failed rounds in a row
        self.busy = False  # a round is in flight
        self.missed = False  # its row was not there to claim when its round was due


class _Target:
    """One push address: its circuit breaker and its failures not yet logged."""

    __slots__ = ("detail", "failures", "logged", "open_until", "parked", "probing", "pushes")

    def __init__(self) -> None:
        self.pushes = 0  # messages tracked for it
        self.failures = 0  # failed rounds in a row
        self.open_until = 0.0  # paused until then (loop time)
        self.probing = False  # one round is trying whether it is back
        self.parked: list[OutboxKey] = []  # messages waiting for the probe
        self.logged = 0  # failed rounds not yet logged
        self.detail = ""  # the last failure

    @property
    def broken(self) -> bool:
        return self.failures >= BREAK_AFTER


class DeliveryLoop:
    def __init__(
        self,
        service: Outbox,
        hub: PollHub,
        pusher: Pusher,
        server_url: str,
        batch_size: int,
        interval_ms: int,
        claim_ttl_ms: int = 10000,
        unblock_hold_ms: int = 10000,
    ) -> None:
        self._service = service
        self._hub = hub
        self._pusher = pusher
        self._execute_head = ExecuteHead(server_url)
        self._batch = batch_size
        self._interval = interval_ms / 1000
        # Who this server is to the other servers on the outbox, and how long its claims last;
        # a push claim also covers a whole round, so a slow target is not pushed twice.
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self._claim_ttl = claim_ttl_ms
        # An unblock stays this server's while its stream confirms it (``PollHub.deliver``).
        self._hold = unblock_hold_ms / 1000
        self._poll_ttl = claim_ttl_ms + unblock_hold_ms
        self._push_ttl = claim_ttl_ms + round(pusher.round_time() * 1000)
        # Where the next page starts. In seq order (SQLite) it stays at the last row read
        # once a scan is through, so later passes read only new rows; else back to 0.
        self._in_order = service.outbox_in_order
        self._after = 0
        self._rescan = False  # read from the start next pass (rows were left behind)
        self._rescan_later = False  # ... at the next interval (nothing will say when)
        self._wake = asyncio.Event()  # a push finished, or rows were left behind
        self._read_now = False  # the next wake-up should read the outbox
        # Poll rows being delivered, or delivered and waiting for their acknowledgement.
        self._busy: set[int] = set()
        self._given_up: list[Delivery] = []  # poll rows no connection took: claims to give up
        self._delivered: list[Delivery] = []
        self._polls: set[asyncio.Task[None]] = set()
        self._collecting = False  # a pass is waiting for its poll writes
        # Push messages by outbox key, their targets, and when each may go next.
        self._pushes: dict[OutboxKey, _Push] = {}
        self._targets: dict[str, _Target] = {}
        self._due: list[tuple[float, OutboxKey]] = []
        self._pushing: set[asyncio.Task[None]] = set()
        self._failed_rounds = 0  # since the last summary
        self._summarized = -math.inf
        hub.subscribe(on_connect=self._left_behind, on_drain=self._left_behind)

    def wire(self, delivery: Delivery) -> bytes:
        """The message JSON as sent: executes carry this server's URL."""
        message = delivery.message
        if message.kind == "execute":
            message = msgspec.structs.replace(message, head=self._execute_head)
        return _encode(message)

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
        until = read_at
        if self._due and len(self._pushing) < self._pusher.concurrency:
            until = min(until, self._due[0][0])
        waits = [asyncio.ensure_future(changed.wait()), asyncio.ensure_future(self._wake.wait())]
        try:
            await asyncio.wait(
                waits, timeout=max(0.0, until - loop.time()), return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for wait in waits:
                wait.cancel()
        return changed.is_set() or self._read_now or loop.time() >= read_at

    def _left_behind(self) -> None:
        """A connection registered or drained: rows left behind may go now."""
        self._rescan = True
        self._read_now = True
        self._wake.set()

    async def deliver_once(self) -> bool:
        """Read and deliver one page; True when the outbox may hold more after it."""
        await self._acknowledge()
        if self._rescan:
            self._rescan = False
            self._after = 0
        rows = await self._service.undelivered(
            self._batch, after=self._after, groups=self._hub.groups()
        )
        full = len(rows) >= self._batch
        if rows and (full or self._in_order):
            self._after = rows[-1].seq
        elif not self._in_order:
            self._after = 0
        to_poll: dict[int, PollAddress] = {}
        for delivery in rows:
            if delivery.seq in self._busy:
                continue
            if (address := parse_poll(delivery.address)) is not None:
                # A server without a connection for it leaves it to the servers that have one.
                # It is read again when a connection that may take it registers.
                if self._hub.reachable(address):
                    to_poll[delivery.seq] = address
            elif is_http(delivery.address):
                self._track(delivery)
            else:
                log.warning("dropping message to undeliverable address %r", delivery.address)
                self._busy.add(delivery.seq)
                self._delivered.append(delivery)
        if not self._in_order:
            # Where rows commit in seq order one server owns the outbox: nobody to hold off.
            await self._hold_backoffs([d for d in rows if is_http(d.address)])
        polls = [
            self._start_poll(delivery, to_poll[delivery.seq])
            for delivery in await self._claim([d for d in rows if d.seq in to_poll], self._poll_ttl)
        ]
        if polls:
            self._collecting = True
            try:
                await asyncio.wait(polls, timeout=_ACK_GRACE)
            finally:
                self._collecting = False
        await self._acknowledge()
        return full

    async def _claim(self, deliveries: list[Delivery], ttl: int) -> list[Delivery]:
        """The deliveries this server may make now (others may hold some of them)."""
        if not deliveries:
            return []
        return await self._service.claim(deliveries, self.holder, ttl)

    # -- poll -------------------------------------------------------------------------------

    def _start_poll(self, delivery: Delivery, address: PollAddress) -> asyncio.Task[None]:
        self._busy.add(delivery.seq)
        task = asyncio.create_task(self._poll(delivery, address))
        self._polls.add(task)
        task.add_done_callback(self._polls.discard)
        return task

    async def _poll(self, delivery: Delivery, address: PollAddress) -> None:
        # An execute counts once written: a lost one comes back through the task's retry.
        # Nothing re-sends an unblock, so it counts only once its stream confirms it.
        hold = self._hold if delivery.message.kind == "unblock" else None
        outcome = PollOutcome.NOT_TAKEN
        try:
            outcome = await self._hub.deliver(address, self.wire(delivery), hold)
        finally:
            if outcome is PollOutcome.DELIVERED:
                self._delivered.append(delivery)
                if not self._collecting:
                    self._wake.set()  # its pass has already acknowledged: acknowledge soon
            else:
                # Another server may hold a connection that takes it: let go at once. This
                # one reads it again when a connection registers or drains, or at the latest
                # at the next interval.
                self._given_up.append(delivery)
                self._busy.discard(delivery.seq)
                if outcome is PollOutcome.LOST:
                    self._left_behind()  # look for a connection now: perhaps it reconnected
                else:
                    self._rescan_later = True

    # -- push -------------------------------------------------------------------------------

    def _track(self, delivery: Delivery) -> None:
        """Note a push row read from the outbox: a new message, or a newer row for one."""
        key = outbox_key(delivery.address, delivery.message)
        push = self._pushes.get(key)
        if push is None:
            push = self._pushes[key] = _Push(key, delivery, asyncio.get_running_loop().time())
            self._targets.setdefault(delivery.address, _Target()).pushes += 1
            heapq.heappush(self._due, (push.due, key))
        elif delivery.seq > push.delivery.seq:
            push.delivery = delivery  # the same address: it is part of the key
            push.missed = False

    async def _hold_backoffs(self, rows: list[Delivery]) -> None:
        """Claim rows read while their message backs off (a task retry rewrote them, which
        cleared the claim), so no other server pushes them before their time either."""
        now = asyncio.get_running_loop().time()
        waiting = [
            (push.delivery, push.due - now)
            for d in rows
            if (push := self._pushes.get(outbox_key(d.address, d.message))) is not None
            and not push.busy
            and now < push.due < math.inf
        ]
        if waiting:
            longest = max(wait for _, wait in waiting)
            await self._claim([d for d, _ in waiting], self._claim_ttl + round(longest * 1000))

    async def _dispatch(self) -> None:
        """Start the push rounds that are due, as many as there are free slots."""
        now = asyncio.get_running_loop().time()
        picked: list[_Push] = []
        while self._due and self._due[0][0] <= now:
            if len(self._pushing) + len(picked) >= self._pusher.concurrency:
                break
            due, key = heapq.heappop(self._due)
            push = self._pushes.get(key)
            if push is None or push.busy or push.due != due:
                continue  # gone, in flight, or rescheduled since
            target = self._targets[push.delivery.address]
            if target.open_until > now:
                self._schedule(push, target.open_until)
            elif target.probing:
                push.due = math.inf
                target.parked.append(key)
            else:
                target.probing = target.broken  # the first round after a pause probes
                push.busy = True
                picked.append(push)
        if not picked:
            return
        claimed = {d.seq for d in await self._claim([p.delivery for p in picked], self._push_ttl)}
        for push in picked:
            delivery = push.delivery
            target = self._targets[delivery.address]
            if delivery.seq in claimed:
                # A probe is one attempt: a paused target is asked once whether it is back.
                probe = 1 if target.probing else None
                task = asyncio.create_task(self._push(push, delivery, probe))
                self._pushing.add(task)
                task.add_done_callback(self._pushing.discard)
                continue
            push.busy = False
            if target.probing:
                self._end_probe(target, now)
            if push.missed:
                self._forget(push)  # gone (delivered, reset), or another server's now
            else:
                # Perhaps only rewritten since it was read: a pass brings the newer row. Keep
                # its backoff meanwhile, so a task retry does not reset it.
                push.missed = True
                self._schedule(push, now + self._pusher.backoff(1 + push.failures))

    def _schedule(self, push: _Push, at: float) -> None:
        push.due = at
        heapq.heappush(self._due, (at, push.key))

    def _forget(self, push: _Push) -> None:
        del self._pushes[push.key]
        address = push.delivery.address
        target = self._targets[address]
        target.pushes -= 1
        if target.pushes == 0:
            del self._targets[address]

    def _end_probe(self, target: _Target, now: float) -> None:
        """The probe is over: the messages parked behind it go when the target allows."""
        target.probing = False
        for key in target.parked:
            if (push := self._pushes.get(key)) is not None and push.due == math.inf:
                self._schedule(push, max(now, target.open_until))
        target.parked.clear()

    async def _push(self, push: _Push, delivery: Delivery, attempts: int | None) -> None:
        try:
            outcome = await self._pusher.push(delivery.address, self.wire(delivery), attempts)
        except Exception as e:
            outcome = Outcome(False, repr(e))
        wait = self._pushed(push, delivery, outcome)
        self._wake.set()
        if wait is None or self._in_order or push.busy:
            return  # in seq order one server owns the outbox: nobody to hold off
        try:
            # Hold the row through the backoff: the next round is this server's to make. A
            # row rewritten meanwhile is held when a pass reads it (``_hold_backoffs``).
            await self._claim([push.delivery], self._claim_ttl + round(wait * 1000))
        except Exception:
            log.exception("extending the claim on a push to %s failed", delivery.address)

    def _pushed(self, push: _Push, delivery: Delivery, outcome: Outcome) -> float | None:
        """Book a round's outcome; the backoff after a failure, None after a success."""
        now = asyncio.get_running_loop().time()
        push.busy = False
        target = self._targets[delivery.address]
        if outcome.delivered:
            self._delivered.append(delivery)
            if target.logged or target.broken:
                log.info("push to %s delivered again", delivery.address)
            target.failures = target.logged = 0
            target.open_until = 0.0
            if target.probing:
                self._end_probe(target, now)
            push.failures = 0
            if push.delivery.seq == delivery.seq:
                self._forget(push)
            else:
                self._schedule(push, now)  # rewritten meanwhile: the newer row goes too
            return None
        push.failures += 1
        wait = self._pusher.backoff(self._pusher.retries + push.failures)
        self._schedule(push, now + wait)
        if target.open_until <= now:  # rounds begun before a pause do not lengthen it
            target.failures += 1
            if target.broken:
                pause = self._pusher.backoff(self._pusher.retries + target.failures - BREAK_AFTER)
                target.open_until = now + pause
        if target.probing:
            self._end_probe(target, now)
        target.logged += 1
        target.detail = outcome.detail
        self._failed_rounds += 1
        self._summarize(now)
        return wait

    def _summarize(self, now: float) -> None:
        """Log push failures in summary, at most every ``LOG_EVERY`` seconds."""
        if now - self._summarized < LOG_EVERY:
            return
        self._summarized = now
        failing = [(address, t) for address, t in self._targets.items() if t.logged]
        for address, target in failing[:LOG_TARGETS]:
            pause = max(0.0, target.open_until - now)
            log.warning(
                "push to %s failed %d round(s) (last: %s)%s",
                address,
                target.logged,
                target.detail,
                f"; paused for {pause:.1f}s" if pause else "",
            )
        for _, target in failing:
            target.logged = 0
        paused = sum(1 for t in self._targets.values() if t.open_until > now)
        log.warning(
            "push: %d failed round(s) to %d target(s) in the last %.0fs; %d message(s) waiting "
            "for %d target(s), %d paused; %d round(s) in flight; asyncio tasks: %d",
            self._failed_rounds,
            len(failing),
            LOG_EVERY,
            len(self._pushes),
            len(self._targets),
            paused,
            len(self._pushing),
            len(asyncio.all_tasks()),
        )
        self._failed_rounds = 0

    # -- acknowledgement and shutdown ----------------------------------------------------------

    async def _acknowledge(self) -> None:
        """Remove delivered rows from the outbox, and give up the claims on poll rows that
        no connection took."""
        if self._given_up:
            given_up, self._given_up = self._given_up, []
            try:
                await self._claim(given_up, 0)
            except Exception:
                # The claims lapse on their own; other servers just wait a little longer.
                log.exception("giving up %d claims failed", len(given_up))
        if not self._delivered:
            return
        deliveries, self._delivered = self._delivered, []
        try:
            await self._service.ack(deliveries)
        except Exception:
            # Delivered but still in the outbox: it will be delivered again (at least once).
            log.exception("acknowledging %d deliveries failed", len(deliveries))
            self._rescan_later = True
        self._busy.difference_update(d.seq for d in deliveries)

    async def stop(self) -> None:
        """Cancel deliveries in flight and acknowledge what was already delivered."""
        tasks = [*self._polls, *self._pushing]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        with contextlib.suppress(Exception):
            await self._acknowledge()
