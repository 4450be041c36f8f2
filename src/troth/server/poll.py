"""The poll hub: open SSE connections by group and id, and the routing of poll addresses.

Routing (as the reference server routes, docs/references.md#poll-routing, with troth's
choices where the reference drops messages):

- ``poll://uni@group/id`` reaches only connections with that id.
- ``poll://any@group/id`` prefers connections with that id, then falls back to the rest of
  the group; ``poll://any@group`` reaches any connection of the group.
- The rest of a group is tried in round-robin order, so work spreads over the group's
  workers.
- A message counts as delivered only once its frame was written to a live connection. A
  full connection queue, a closed connection or a write that takes too long moves on to the
  next candidate; when none takes it, ``deliver`` answers False and the message stays in
  the outbox for a later pass. A connection that turned a frame away for want of room
  calls ``on_drain`` once its queue is half empty, so that pass comes as soon as it can
  succeed, neither spinning on a full queue nor waiting for a timer.
- A frame the deliverer asks to have *confirmed* (an unblock: nothing else re-sends it) is
  not delivered until the connection shows it arrived. A stream opened with ``?ack=1``
  numbers its frames (``id: n``) and its client acknowledges the highest number it has
  handled (``POST /poll/{group}/{id}``); one that does not acknowledge within ``hold`` is
  taken for stalled and closed. A stream without acknowledgements (the official SDKs) has
  its frame confirmed by staying open for ``hold`` after writing it. Either way, a stream
  that ends first has lost the frame, and the message is delivered again.
- A connection that does not write a frame within ``write_timeout`` has stopped reading:
  it is closed, so that it neither holds messages nor blocks its group.
- An id belongs to the credentials that connected it (``owner``: who the token names; one
  anonymous owner when auth is off). A connection for an id that is connected with other
  credentials is refused (409); one with the same credentials takes the id over, and the
  older connections for it are closed (the worker reconnected before its old stream was
  noticed dead). Connections are capped in all, per group and per owner.
"""

from __future__ import annotations

import asyncio
import enum
import itertools
import logging
import secrets
from collections import Counter, deque
from collections.abc import Callable

from troth.protocol.addresses import PollAddress

log = logging.getLogger(__name__)


class Outcome(enum.Enum):
    """What became of a message offered to a poll address."""

    DELIVERED = "delivered"  # written (and confirmed, when asked)
    NOT_TAKEN = "not taken"  # no connection took it
    LOST = "lost"  # written to a connection that ended (or stalled) before confirming it


class Refused(Exception):
    """A poll connection the hub will not take: the HTTP status and why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class _Pending:
    """A message waiting in a connection's queue, and who is waiting to hear of it."""

    __slots__ = ("confirmed", "message", "number", "written")

    def __init__(self, message: bytes, confirm: bool) -> None:
        loop = asyncio.get_running_loop()
        self.message = message  # the message JSON; the writer frames it
        self.number = 0  # the frame's number on its stream, once written
        self.written: asyncio.Future[bool] = loop.create_future()
        self.confirmed: asyncio.Future[bool] | None = loop.create_future() if confirm else None


class PollConnection:
    """One worker's SSE stream: a bounded queue of frames its writer drains."""

    def __init__(
        self,
        group: str,
        id: str,
        capacity: int,
        on_drain: Callable[[], None] = lambda: None,
        acks: bool = False,
        owner: str | None = None,
    ) -> None:
        self.group = group
        self.id = id
        self.owner = owner  # the credentials that opened it (None: auth is off)
        self.acks = acks  # its client acknowledges what it handled
        self.token = secrets.token_urlsafe(12)  # names the stream in acknowledgements
        self.closed = False
        self.writer: asyncio.Task[None] | None = None  # cancelled to drop a stalled stream
        self._capacity = capacity
        self._queue: deque[_Pending] = deque()
        self._wakeup = asyncio.Event()
        self._ended = asyncio.Event()
        self._on_drain = on_drain
        self._refused = False  # an offer found the queue full since it last drained
        self._numbers = itertools.count(1)
        self._unacked: dict[int, asyncio.Future[bool]] = {}  # by frame number, ascending

    def offer(self, message: bytes, confirm: bool = False) -> _Pending | None:
        """Queue a message; None when the connection is closed or its queue is full."""
        if self.closed:
            return None
        if len(self._queue) >= self._capacity:
            self._refused = True
            return None
        pending = _Pending(message, confirm)
        self._queue.append(pending)
        self._wakeup.set()
        return pending

    async def take(self, timeout: float) -> _Pending | None:
        """The next message to write, or None after ``timeout`` seconds or once closed."""
        while not self._queue and not self.closed:
            self._wakeup.clear()
            try:
                async with asyncio.timeout(timeout):
                    await self._wakeup.wait()
            except TimeoutError:
                return None
        if self.closed or not self._queue:
            return None
        pending = self._queue.popleft()
        if self._refused and len(self._queue) <= self._capacity // 2:
            # Frames were turned away for want of room: there is room again, say so now
            # rather than leave them to a later delivery pass.
            self._refused = False
            self._on_drain()
        return pending

    def frame(self, pending: _Pending) -> bytes:
        """The SSE frame for ``pending``, numbered on a stream that acknowledges."""
        pending.number = next(self._numbers)
        if not self.acks:
            return b"data: " + pending.message + b"\n\n"
        if pending.confirmed is not None:
            self._unacked[pending.number] = pending.confirmed
        return b"id: %d\ndata: %b\n\n" % (pending.number, pending.message)

    def ack(self, seen: int) -> None:
        """The client has handled every frame up to number ``seen``."""
        while self._unacked:
            number = next(iter(self._unacked))
            if number > seen:
                break
            confirmed = self._unacked.pop(number)
            if not confirmed.done():
                confirmed.set_result(True)

    async def confirmation(self, pending: _Pending, hold: float) -> bool:
        """Whether the written ``pending`` arrived: acknowledged within ``hold`` seconds, or
        (on a stream without acknowledgements) the stream still open after ``hold``."""
        try:
            async with asyncio.timeout(hold):
                if pending.confirmed is not None and self.acks:
                    return await pending.confirmed
                await self._ended.wait()
                return False
        except TimeoutError:
            if not self.acks:
                return True
        log.warning(
            "closing the poll stream of %s/%s: frame %d not acknowledged within %.1f s",
            self.group,
            self.id,
            pending.number,
            hold,
        )
        self.abort()
        return False

    def close(self) -> None:
        """Stop taking frames; whoever waits on a queued or unconfirmed frame hears it was not
        delivered."""
        self.closed = True
        self._ended.set()
        while self._queue:
            pending = self._queue.popleft()
            if not pending.written.done():
                pending.written.set_result(False)
        for confirmed in self._unacked.values():
            if not confirmed.done():
                confirmed.set_result(False)
        self._unacked.clear()
        self._wakeup.set()

    def abort(self) -> None:
        """Close, and drop the connection too: its writer may be stuck on a peer that does
        not read, which only ending the response frees."""
        self.close()
        if self.writer is not None:
            self.writer.cancel()


class PollHub:
    def __init__(
        self,
        *,
        max_connections: int,
        buffer_size: int,
        write_timeout_ms: int,
        on_connect: Callable[[], None] = lambda: None,
        max_per_group: int | None = None,
        max_per_owner: int | None = None,
    ) -> None:
        self._max = max_connections
        self._max_per_group = max_per_group or max_connections
        self._max_per_owner = max_per_owner or max_connections
        self._owners: Counter[str] = Counter()  # connections per owner
        self._buffer_size = buffer_size
        self._write_timeout = write_timeout_ms / 1000
        self._on_connect = [on_connect]
        self._on_drain: list[Callable[[], None]] = []
        self._groups: dict[str, list[PollConnection]] = {}
        self._streams: dict[str, PollConnection] = {}  # by token
        self._turn: dict[str, int] = {}
        self._count = 0

    @property
    def count(self) -> int:
        return self._count

    def register(
        self, group: str, id: str, acks: bool = False, owner: str | None = None
    ) -> PollConnection:
        """A new connection for ``owner``; ``Refused`` when the id is someone else's or a
        cap is reached."""
        members = self._groups.get(group, [])
        same_id = [c for c in members if c.id == id and not c.closed]
        if any(c.owner != owner for c in same_id):
            raise Refused(409, f"Poll id {id!r} of group {group!r} is connected by another client")
        taken_over = len(same_id)
        if self._count - taken_over >= self._max:
            raise Refused(503, "Poll registration at capacity")
        if len(members) - taken_over >= self._max_per_group:
            raise Refused(503, f"Poll registration at capacity for group {group!r}")
        if owner is not None and self._owners[owner] - taken_over >= self._max_per_owner:
            raise Refused(503, "Poll registration at capacity for these credentials")
        for old in same_id:
            log.info("poll stream %s/%s reconnected: closing its older stream", group, id)
            self.unregister(old)
        connection = PollConnection(group, id, self._buffer_size, self._drained, acks, owner)
        self._groups.setdefault(group, []).append(connection)
        self._streams[connection.token] = connection
        if owner is not None:
            self._owners[owner] += 1
        self._count += 1
        # Messages held back for want of a connection can go now.
        for callback in self._on_connect:
            callback()
        return connection

    def subscribe(
        self,
        on_connect: Callable[[], None] | None = None,
        on_drain: Callable[[], None] | None = None,
    ) -> None:
        """Also call ``on_connect`` when a connection registers, and ``on_drain`` when a
        connection that turned frames away has room again."""
        if on_connect is not None:
            self._on_connect.append(on_connect)
        if on_drain is not None:
            self._on_drain.append(on_drain)

    def _drained(self) -> None:
        for callback in self._on_drain:
            callback()

    def ack(self, group: str, id: str, token: str, seen: int) -> bool:
        """Note a stream's acknowledgement; False if no such stream is open here."""
        connection = self._streams.get(token)
        if connection is None or (connection.group, connection.id) != (group, id):
            return False
        connection.ack(seen)
        return True

    def unregister(self, connection: PollConnection) -> None:
        connection.abort()
        self._streams.pop(connection.token, None)
        members = self._groups.get(connection.group)
        if members is None or connection not in members:
            return
        members.remove(connection)
        self._count -= 1
        if connection.owner is not None:
            self._owners[connection.owner] -= 1
            if not self._owners[connection.owner]:
                del self._owners[connection.owner]
        if not members:
            del self._groups[connection.group]
            self._turn.pop(connection.group, None)

    def close_all(self) -> None:
        """End every stream (server shutdown): SSE responses never finish on their own."""
        for members in list(self._groups.values()):
            for connection in list(members):
                connection.close()

    def group_sizes(self) -> dict[str, int]:
        """The open connections of each group (the metrics' ``troth_poll_connections``)."""
        return {group: len(members) for group, members in self._groups.items()}

    def groups(self) -> list[str]:
        """The groups with a connection here: poll messages for any other group cannot be
        delivered by this server, so delivery need not read them."""
        return list(self._groups)

    def reachable(self, address: PollAddress) -> bool:
        """Whether a connection here may take a message for ``address``: any of the group
        for anycast, one with the id for unicast. Unlike ``candidates``, no turn is taken."""
        members = self._groups.get(address.group, ())
        if address.cast == "uni":
            return any(c.id == address.id and not c.closed for c in members)
        return any(not c.closed for c in members)

    def candidates(self, address: PollAddress) -> list[PollConnection]:
        """The connections that may take a message for ``address``, best first."""
        members = self._groups.get(address.group)
        if not members:
            return []
        named = [c for c in reversed(members) if c.id == address.id] if address.id else []
        if address.cast == "uni":
            return named
        others = [c for c in members if c.id != address.id] if named else members
        if len(others) > 1:
            turn = self._turn.get(address.group, 0)
            self._turn[address.group] = turn + 1
            start = turn % len(others)
            others = others[start:] + others[:start]
        return named + others

    async def deliver(
        self, address: PollAddress, message: bytes, hold: float | None = None
    ) -> Outcome:
        """Write ``message`` to the best live connection for ``address``; with ``hold``, also
        wait up to that many seconds for the connection to confirm it arrived."""
        for connection in self.candidates(address):
            pending = connection.offer(message, confirm=hold is not None)
            if pending is None:
                continue
            try:
                # On timeout the future is cancelled, and the writer skips a cancelled frame.
                async with asyncio.timeout(self._write_timeout):
                    written = await pending.written
            except TimeoutError:
                log.warning(
                    "closing the poll stream of %s/%s: a frame waited %.1f s to be written",
                    connection.group,
                    connection.id,
                    self._write_timeout,
                )
                connection.abort()
                continue
            if not written:
                continue
            if hold is None or await connection.confirmation(pending, hold):
                return Outcome.DELIVERED
            return Outcome.LOST  # time has passed: the caller looks for connections anew
        return Outcome.NOT_TAKEN
