"""The poll hub: open SSE connections by group and id, and the routing of poll addresses.

Routing (wire-protocol.md §10.2, with troth's choices where the reference drops messages):

- ``poll://uni@group/id`` reaches only connections with that id.
- ``poll://any@group/id`` prefers connections with that id, then falls back to the rest of
  the group; ``poll://any@group`` reaches any connection of the group.
- Among several connections with the same id (a worker that reconnected before its old
  connection was noticed dead) the newest is tried first; the rest of a group is tried in
  round-robin order, so work spreads over the group's workers.
- A message counts as delivered only once its frame was written to a live connection. A
  full connection queue, a closed connection or a write that takes too long moves on to the
  next candidate; when none takes it, ``deliver`` answers False and the message stays in
  the outbox for a later pass. A connection that turned a frame away for want of room
  calls ``on_drain`` once its queue is half empty, so that pass comes as soon as it can
  succeed, neither spinning on a full queue nor waiting for a timer.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from collections.abc import Callable

from troth.protocol.addresses import PollAddress


class _Pending:
    """A frame waiting in a connection's queue, and who is waiting to hear it was written."""

    __slots__ = ("frame", "written")

    def __init__(self, frame: bytes) -> None:
        self.frame = frame
        self.written: asyncio.Future[bool] = asyncio.get_running_loop().create_future()


class PollConnection:
    """One worker's SSE stream: a bounded queue of frames its writer drains."""

    _ids = itertools.count()

    def __init__(
        self, group: str, id: str, capacity: int, on_drain: Callable[[], None] = lambda: None
    ) -> None:
        self.group = group
        self.id = id
        self.serial = next(self._ids)  # registration order, newest = largest
        self.closed = False
        self._capacity = capacity
        self._queue: deque[_Pending] = deque()
        self._wakeup = asyncio.Event()
        self._on_drain = on_drain
        self._refused = False  # an offer found the queue full since it last drained

    def offer(self, frame: bytes) -> asyncio.Future[bool] | None:
        """Queue a frame; None when the connection is closed or its queue is full."""
        if self.closed:
            return None
        if len(self._queue) >= self._capacity:
            self._refused = True
            return None
        pending = _Pending(frame)
        self._queue.append(pending)
        self._wakeup.set()
        return pending.written

    async def take(self, timeout: float) -> _Pending | None:
        """The next frame to write, or None after ``timeout`` seconds or once closed."""
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

    def close(self) -> None:
        """Stop taking frames; whoever waits on a queued frame hears it was not written."""
        self.closed = True
        while self._queue:
            pending = self._queue.popleft()
            if not pending.written.done():
                pending.written.set_result(False)
        self._wakeup.set()


class PollHub:
    def __init__(
        self,
        max_connections: int,
        buffer_size: int,
        write_timeout: float,
        on_connect: Callable[[], None] = lambda: None,
    ) -> None:
        self._max = max_connections
        self._buffer_size = buffer_size
        self._write_timeout = write_timeout
        self._on_connect = [on_connect]
        self._on_drain: list[Callable[[], None]] = []
        self._groups: dict[str, list[PollConnection]] = {}
        self._turn: dict[str, int] = {}
        self._count = 0

    @property
    def count(self) -> int:
        return self._count

    def register(self, group: str, id: str) -> PollConnection | None:
        """A new connection, or None when the hub is at capacity."""
        if self._count >= self._max:
            return None
        connection = PollConnection(group, id, self._buffer_size, self._drained)
        self._groups.setdefault(group, []).append(connection)
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

    def unregister(self, connection: PollConnection) -> None:
        connection.close()
        members = self._groups.get(connection.group)
        if members is None or connection not in members:
            return
        members.remove(connection)
        self._count -= 1
        if not members:
            del self._groups[connection.group]
            self._turn.pop(connection.group, None)

    def close_all(self) -> None:
        """End every stream (server shutdown): SSE responses never finish on their own."""
        for members in list(self._groups.values()):
            for connection in list(members):
                connection.close()

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

    async def deliver(self, address: PollAddress, frame: bytes) -> bool:
        """Write ``frame`` to the best live connection for ``address``; False if none took it."""
        for connection in self.candidates(address):
            written = connection.offer(frame)
            if written is None:
                continue
            try:
                # On timeout the future is cancelled, and the writer skips a cancelled frame.
                async with asyncio.timeout(self._write_timeout):
                    if await written:
                        return True
            except TimeoutError:
                pass
        return False
