"""Connection hygiene: what one client connection may cost the server, in time and memory.

uvicorn's httptools protocol, left as it is, waits for ever for a request that is sent
slowly (slowloris), accepts connections until the process runs out of file descriptors,
accumulates request headers without bound, and buffers a whole response for a client that
never reads it. ``GuardedProtocol`` is that protocol with four bounds, all kept by one
``ConnectionGuard`` per server:

- **read timeout** (``--request-read-timeout``): a connection that is not being answered
  (new, idle between requests, or still sending a request's head or body) has that long
  from when it became so, or from its request's first byte, to complete its request; else
  it is closed. A connection being answered (the request arrived, the response is under way:
  an SSE stream, a slow query) is never timed out for reading.
- **connection cap** (``--max-connections``): at the cap, a new connection closes the
  connection that has been waiting for its request the longest: slow senders go first, a
  client that sends its request at once is served. When every connection is busy being
  answered, the new one gets a 503 instead.
- **request head size** (``MAX_HEAD``): a request line and headers larger than that get a
  431 and the connection is closed.
- **unsent response bytes** (``--write-timeout``, ``--max-buffered-bytes``): a connection
  whose client has not taken any of its pending response for the write timeout is aborted,
  dropping what it holds; and when the bytes waiting for slow readers exceed the budget, the
  connections whose clients read least recently are aborted first until it fits.

The hooks are uvicorn's own protocol callbacks (parser events, ``pause_writing``), so the
request and response paths are uvicorn's, unchanged.
"""

from __future__ import annotations

import asyncio
import logging
import math
import resource
from collections import Counter, deque
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

log = logging.getLogger(__name__)

MAX_HEAD = 64 * 1024  # bytes of request line and headers accepted
_SWEEP_MAX = 1.0  # seconds between sweeps at most
LOG_EVERY = 10.0  # seconds between summaries of the connections closed

_TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain\r\n"
    b"content-length: 32\r\nconnection: close\r\n\r\nRequest headers are over 64 KiB\n"
)
_FULL = (
    b"HTTP/1.1 503 Service Unavailable\r\nretry-after: 1\r\ncontent-type: text/plain\r\n"
    b"content-length: 25\r\nconnection: close\r\n\r\nToo many open connections"
)


def default_max_connections() -> int:
    """Three quarters of the open-files limit: the rest is for the database, push
    connections and the listening socket, so accepting never fails for want of one."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 65536
    return max(16, soft * 3 // 4)


class _Stall:
    """A connection whose transport holds more unsent bytes than its high-water mark."""

    __slots__ = ("read_at", "size")

    def __init__(self, size: int, now: float) -> None:
        self.size = size  # unsent bytes at the last look
        self.read_at = now  # when the client last took any of them

    def look(self, size: int, now: float) -> None:
        if size < self.size:
            self.read_at = now
        self.size = size


class ConnectionGuard:
    def __init__(
        self,
        *,
        read_timeout_ms: int,
        max_connections: int,
        write_timeout_ms: int,
        max_buffered_bytes: int,
    ) -> None:
        self.read_timeout = read_timeout_ms / 1000
        self.max_connections = max_connections or default_max_connections()
        self.write_timeout = write_timeout_ms / 1000
        self.max_buffered = max_buffered_bytes
        # Connections not being answered, oldest first, with when they became so: the ones
        # the read timeout applies to and the cap may close. (A dict keeps insertion order.)
        self._waiting: dict[GuardedProtocol, float] = {}
        self._open: set[GuardedProtocol] = set()
        self._stalled: dict[GuardedProtocol, _Stall] = {}
        self._sweeping: asyncio.TimerHandle | None = None
        self._closed: Counter[str] = Counter()  # connections closed, by why, not yet logged
        self._logged = -math.inf
        self._interval = max(0.05, min(_SWEEP_MAX, self.read_timeout / 4, self.write_timeout / 4))
        self.protocol: type[GuardedProtocol] = type(
            "GuardedProtocol", (GuardedProtocol,), {"guard": self}
        )

    # -- what connections report ------------------------------------------------------------

    def opened(self, connection: GuardedProtocol) -> bool:
        """A new connection; False when it must be refused (every other one is busy)."""
        if len(self._open) >= self.max_connections:
            if not self._waiting:
                self._closed["refused with 503: every connection busy at the cap"] += 1
                return False
            self.close(next(iter(self._waiting)), "to make room at the connection cap")
        self._open.add(connection)
        self.waiting(connection)
        if self._sweeping is None:
            self._schedule()
        return True

    def waiting(self, connection: GuardedProtocol) -> None:
        """Its read timeout starts now (it moves to the back of the queue)."""
        self._waiting.pop(connection, None)
        self._waiting[connection] = connection.loop.time()

    def answered(self, connection: GuardedProtocol) -> None:
        self._waiting.pop(connection, None)

    def closed(self, connection: GuardedProtocol) -> None:
        self._open.discard(connection)
        self._waiting.pop(connection, None)
        self._stalled.pop(connection, None)

    def stalled(self, connection: GuardedProtocol) -> None:
        size = connection.transport.get_write_buffer_size()
        self._stalled[connection] = _Stall(size, connection.loop.time())
        self._keep_budget()

    def flowing(self, connection: GuardedProtocol) -> None:
        self._stalled.pop(connection, None)

    # -- enforcement ------------------------------------------------------------------------

    def close(self, connection: GuardedProtocol, why: str) -> None:
        self._closed[why] += 1
        self.closed(connection)
        connection.transport.close()

    def abort(self, connection: GuardedProtocol, why: str) -> None:
        """Close at once, dropping unsent bytes (``close`` would wait to send them)."""
        self._closed[why] += 1
        self.closed(connection)
        connection.transport.abort()

    def _schedule(self) -> None:
        loop = asyncio.get_running_loop()
        self._sweeping = loop.call_later(self._interval, self._sweep)

    def _sweep(self) -> None:
        self._sweeping = None
        if not self._open:
            return  # the next connection starts sweeping again
        now = asyncio.get_running_loop().time()
        expired = now - self.read_timeout
        for connection, since in list(self._waiting.items()):
            if since > expired:
                break  # the rest became waiting later still
            self.close(connection, "request not received within the read timeout")
        for connection, stall in list(self._stalled.items()):
            stall.look(connection.transport.get_write_buffer_size(), now)
            if now - stall.read_at > self.write_timeout:
                self.abort(connection, "response not read within the write timeout")
        self._keep_budget()
        if self._closed and now - self._logged >= LOG_EVERY:
            self._logged = now
            counts = ", ".join(f"{n} {why}" for why, n in self._closed.items())
            log.warning("closed connections in the last %.0fs: %s", LOG_EVERY, counts)
            self._closed.clear()
        self._schedule()

    def _keep_budget(self) -> None:
        """Abort the connections that read least recently while the unsent bytes of all
        stalled ones exceed the budget."""
        now = asyncio.get_running_loop().time()
        total = 0
        for connection, stall in self._stalled.items():
            stall.look(connection.transport.get_write_buffer_size(), now)
            total += stall.size
        if total <= self.max_buffered:
            return
        for connection, stall in sorted(self._stalled.items(), key=lambda item: item[1].read_at):
            total -= stall.size
            self.abort(connection, "slowest reader while unsent responses exceeded the budget")
            if total <= self.max_buffered:
                return


class GuardedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, reporting to its server's ``ConnectionGuard``."""

    guard: ConnectionGuard  # set on the subclass each guard makes (``ConnectionGuard.protocol``)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._reading = False  # a request's head or body is still arriving
        self._answering = False  # a response is under way (or a request waits in the pipeline)
        self._in_head = False  # the request line and headers are still arriving
        self._head = 0  # bytes received of them so far

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if not self.guard.opened(self):
            transport.write(_FULL)
            transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.guard.closed(self)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._in_head:
            self._head += len(data)
            if self._head > MAX_HEAD and not self.transport.is_closing():
                self.transport.write(_TOO_LARGE)
                self.guard.close(self, "request head over 64 KiB")

    # -- parser events ----------------------------------------------------------------------

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._reading = self._in_head = True
        self._head = 0
        self.guard.waiting(self)  # the whole request must arrive within the read timeout

    def on_headers_complete(self) -> None:
        self._in_head = False
        super().on_headers_complete()
        self._answering = True

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._reading = False
        if self._answering:
            self.guard.answered(self)

    def on_response_complete(self) -> None:
        held = None
        if self.pipeline and self.flow.write_paused:
            # A client that is not reading its answers gets no more built: the next
            # pipelined request waits until it reads some (``resume_writing``), or the write
            # timeout closes the connection. So one unread response at most sits in memory.
            held, self.pipeline = self.pipeline, deque()
        super().on_response_complete()
        if held:
            self.pipeline = held
            self._unset_keepalive_if_required()  # armed by uvicorn for an empty pipeline
        if self.cycle is None or self.cycle.response_complete:
            # No pipelined request started: idle until the next request (or still sending
            # the body of one answered early, say with a 413).
            self._answering = False
            if not self._reading:
                self.guard.waiting(self)

    # -- flow control -----------------------------------------------------------------------

    def pause_writing(self) -> None:
        super().pause_writing()
        self.guard.stalled(self)

    def resume_writing(self) -> None:
        self.guard.flowing(self)
        if self.transport.is_closing():
            # Aborted: uvicorn's connection_lost releases a send waiting to drain once it has
            # marked the response disconnected; released now, it would write to a closed
            # transport.
            return
        super().resume_writing()
        if self.pipeline and (self.cycle is None or self.cycle.response_complete):
            cycle, app = self.pipeline.pop()  # held back by on_response_complete
            self._answering = True
            if not self._reading:
                self.guard.answered(self)
            self._start_asgi_task(cycle, app)
