"""The push transport: outbox messages to ``http(s)://`` addresses, POSTed to their target.

- A message is delivered when its target answers 2xx to a round of ``push_retries``
  attempts (``Pusher.push``). A failed round leaves the row for a further backoff
  (doubling, capped at ``push_backoff_max``); this repeats until the target answers or the
  row is gone. At most ``push_concurrency`` rounds run at once.
- A message is tracked by its outbox key, not its ``seq``: one round in flight per key, and
  its backoff survives the row being rewritten (a task retry re-sends its execute every
  ``tasks_retry_timeout``). A newer row for the key is delivered after the older one.
- A target (push address) whose rounds fail ``BREAK_AFTER`` times in a row is paused: no
  round to it starts until its pause ends, the pause doubling with each failed probe. Then
  one round probes it; success releases every message waiting for it.
- Where several servers share the outbox, a push message is always claimed for its round,
  and one whose round failed stays claimed through its backoff, so the retries keep their
  pace whatever the number of servers.

Failures are logged in summary: one line per failing target per ``LOG_EVERY`` seconds (at
most ``LOG_TARGETS`` targets), and one line with the totals.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import math
from typing import TYPE_CHECKING

from troth.engine import OutboxKey, outbox_key
from troth.protocol.addresses import is_http
from troth.server.push import Outcome, Pusher
from troth.server.transport import Courier
from troth.storage.service import Delivery

if TYPE_CHECKING:
    from troth.server.metrics import ServerMetrics

log = logging.getLogger(__name__)

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


class PushTransport:
    name = "push"
    schemes: tuple[str, ...] = ("http", "https")

    def __init__(
        self, pusher: Pusher, courier: Courier, *, metrics: ServerMetrics | None = None
    ) -> None:
        self._pusher = pusher
        self._courier = courier
        self._metrics = metrics
        # A push claim covers a whole round, so a slow target is not pushed twice.
        self._claim_ttl = courier.claim_ttl_ms
        self._push_ttl = self._claim_ttl + round(pusher.round_time() * 1000)
        # Push messages by outbox key, their targets, and when each may go next.
        self._pushes: dict[OutboxKey, _Push] = {}
        self._targets: dict[str, _Target] = {}
        self._due: list[tuple[float, OutboxKey]] = []
        self._pushing: set[asyncio.Task[None]] = set()
        self._failed_rounds = 0  # since the last summary
        self._summarized = -math.inf

    async def offer(self, rows: list[Delivery]) -> list[Delivery]:
        pushes: list[Delivery] = []
        undeliverable: list[Delivery] = []
        for delivery in rows:
            (pushes if is_http(delivery.address) else undeliverable).append(delivery)
        for delivery in pushes:
            self._track(delivery)
        if not self._courier.in_order:
            # Where rows commit in seq order one server owns the outbox: nobody to hold off.
            await self._hold_backoffs(pushes)
        return undeliverable

    def next_due(self) -> float:
        if self._due and len(self._pushing) < self._pusher.concurrency:
            return self._due[0][0]
        return math.inf

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
            await self._courier.claim(
                [d for d, _ in waiting], self._claim_ttl + round(longest * 1000)
            )

    async def dispatch(self) -> None:
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
        claimed = {
            d.seq for d in await self._courier.claim([p.delivery for p in picked], self._push_ttl)
        }
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
            outcome = await self._pusher.push(
                delivery.address, self._courier.wire(delivery), attempts
            )
        except Exception as e:
            outcome = Outcome(False, repr(e))
        wait = self._pushed(push, delivery, outcome)
        self._courier.wake()
        if wait is None or self._courier.in_order or push.busy:
            return  # in seq order one server owns the outbox: nobody to hold off
        try:
            # Hold the row through the backoff: the next round is this server's to make. A
            # row rewritten meanwhile is held when a pass reads it (``_hold_backoffs``).
            await self._courier.claim([push.delivery], self._claim_ttl + round(wait * 1000))
        except Exception:
            log.exception("extending the claim on a push to %s failed", delivery.address)

    def _pushed(self, push: _Push, delivery: Delivery, outcome: Outcome) -> float | None:
        """Book a round's outcome; the backoff after a failure, None after a success."""
        now = asyncio.get_running_loop().time()
        push.busy = False
        target = self._targets[delivery.address]
        if self._metrics is not None:
            self._metrics.push_round(outcome.delivered)
        if outcome.delivered:
            self._courier.delivered(delivery)
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

    async def stop(self) -> None:
        tasks = list(self._pushing)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
