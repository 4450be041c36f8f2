"""HTTP push: POST a message to an ``http://`` or ``https://`` address.

One delivery round makes up to ``retries`` attempts, waiting ``backoff`` ms before the
second and doubling up to ``backoff_max``; a 2xx answer ends the round in success, anything
else (another status, a refused connection, a timeout) counts as a failed attempt. The
caller bounds how many rounds run at once (``DeliveryLoop``: ``--push-concurrency``), and
logs failures in summary: an attempt here logs nothing, it only says what went wrong.

The requests are made by a small HTTP/1.1 client of its own rather than httpx: a push is one
POST with a JSON body whose answer matters only by its status, and during a storm of
failing targets httpx spent over a millisecond of CPU per attempt (its connection pool does
work linear in its connections for every request), enough to starve the server. Connections
are kept alive per origin and reused; redirects are not followed; proxies are not used.

Only targets the allow-list admits are pushed to (``troth.server.targets``): a new connection
goes to an address the list was asked about, never to the host name resolved once more, and a
refused target ends its round at once with the reason as the failure.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ssl
from typing import TYPE_CHECKING, NamedTuple
from urllib.parse import unquote, urlsplit

from troth.server.targets import PushAllowList, Refused

if TYPE_CHECKING:
    from troth.server.metrics import ServerMetrics

_IDLE_PER_ORIGIN = 64  # keep-alive connections kept per scheme, host and port
_MAX_HEAD = 64 * 1024  # bytes of status line and headers read at most
_MAX_BODY = 1024 * 1024  # a larger answer body is not read: its connection is closed instead


class Outcome(NamedTuple):
    delivered: bool
    detail: str  # why the last attempt failed ("" when delivered)


class _Failed(Exception):
    """An answer that is not HTTP/1.x."""


_Origin = tuple[str, str, int]
_Stream = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class _Client:
    """``POST`` over HTTP/1.1 with keep-alive; answers the status code."""

    def __init__(self, allow: PushAllowList, token: str | None = None) -> None:
        self._allow = allow
        # --push-auth-token: how a target tells troth's pushes from anyone else's POSTs.
        self._authorization = f"Authorization: Bearer {token}" if token else None
        self._idle: dict[_Origin, list[_Stream]] = {}
        self._tls: ssl.SSLContext | None = None

    async def post(self, url: str, body: bytes) -> int:
        reason = self._allow.refusal(url)  # before an idle connection is reused, too
        if reason is not None:
            raise Refused(reason)
        parts = urlsplit(url)
        https = parts.scheme == "https"
        host = parts.hostname or ""
        origin = (parts.scheme, host, parts.port or (443 if https else 80))
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        lines = [
            f"POST {target} HTTP/1.1",
            f"Host: {parts.netloc.rpartition('@')[2]}",
            "Content-Type: application/json",
            f"Content-Length: {len(body)}",
        ]
        if self._authorization is not None:
            lines.append(self._authorization)
        elif parts.username is not None:
            credentials = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
            lines.append(f"Authorization: Basic {base64.b64encode(credentials.encode()).decode()}")
        request = ("\r\n".join(lines) + "\r\n\r\n").encode() + body
        idle = self._idle.get(origin)
        if idle:
            stream = idle.pop()
            try:
                return await self._exchange(origin, stream, request)
            except (ConnectionError, asyncio.IncompleteReadError):
                pass  # the target closed the idle connection meanwhile: once more, on a new one
        return await self._exchange(origin, await self._connect(url, origin, https), request)

    async def _connect(self, url: str, origin: _Origin, https: bool) -> _Stream:
        _, host, port = origin
        addresses = await self._allow.resolve(url)
        if https and self._tls is None:
            self._tls = ssl.create_default_context()
        tls = {"ssl": self._tls, "server_hostname": host} if https else {}
        error: OSError | None = None
        for address in addresses:  # in the resolver's order, as a connection by name would
            try:
                return await asyncio.open_connection(address, port, **tls)  # type: ignore[arg-type]
            except OSError as e:
                error = e
        assert error is not None  # resolve() answers at least one address
        raise error

    async def _exchange(self, origin: _Origin, stream: _Stream, request: bytes) -> int:
        reader, writer = stream
        try:
            writer.write(request)
            await writer.drain()
            status, reusable = await _answer(reader)
        except BaseException:
            writer.close()
            raise
        idle = self._idle.setdefault(origin, [])
        if reusable and len(idle) < _IDLE_PER_ORIGIN:
            idle.append(stream)
        else:
            writer.close()
        return status

    def close(self) -> None:
        for idle in self._idle.values():
            for _, writer in idle:
                writer.close()
        self._idle.clear()


async def _answer(reader: asyncio.StreamReader) -> tuple[int, bool]:
    """Read one answer; its status, and whether the connection may carry another request."""
    while True:
        head = await reader.readuntil(b"\r\n\r\n")
        if len(head) > _MAX_HEAD:
            raise _Failed("answer headers too large")
        status_line, *header_lines = head[:-4].decode("latin-1").split("\r\n")
        version, _, rest = status_line.partition(" ")
        if not version.startswith("HTTP/1.") or not rest[:3].isdigit():
            raise _Failed(f"not an HTTP/1 answer: {status_line[:80]!r}")
        status = int(rest[:3])
        if not 100 <= status < 200:
            break  # an interim answer (100 Continue) is followed by the real one
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip().lower()
    reusable = version == "HTTP/1.1" and "close" not in headers.get("connection", "")
    if status in (204, 304):
        return status, reusable
    if "chunked" in headers.get("transfer-encoding", ""):
        read = 0
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            read += size
            if size == 0:
                while await reader.readuntil(b"\r\n") != b"\r\n":
                    pass  # trailers
                return status, reusable
            if read > _MAX_BODY:
                return status, False
            await reader.readexactly(size + 2)
    if "content-length" in headers:
        length = int(headers["content-length"])
        if length > _MAX_BODY:
            return status, False
        await reader.readexactly(length)
        return status, reusable
    return status, False  # the body runs to the end of the connection: not worth reading


class Pusher:
    def __init__(
        self,
        *,
        concurrency: int,
        timeout_ms: int,
        retries: int,
        backoff_ms: int,
        backoff_max_ms: int,
        token: str | None = None,
        allow: PushAllowList | None = None,
        metrics: ServerMetrics | None = None,
    ) -> None:
        self.concurrency = max(1, concurrency)
        self._metrics = metrics
        self.retries = max(1, retries)
        self._backoff = backoff_ms / 1000
        self._backoff_max = backoff_max_ms / 1000
        self._timeout = timeout_ms / 1000
        self._client = _Client(allow or PushAllowList("public"), token)

    def backoff(self, failures: int) -> float:
        """Seconds to wait after ``failures`` consecutive failures (exponential, capped)."""
        return min(self._backoff * 2 ** max(0, min(failures - 1, 64)), self._backoff_max)

    def round_time(self) -> float:
        """Seconds one round takes at most, not counting waits for a free slot."""
        waits = sum(self.backoff(attempt) for attempt in range(1, self.retries))
        return self.retries * self._timeout + waits

    async def push(self, url: str, body: bytes, attempts: int | None = None) -> Outcome:
        """One delivery round, ended by the first 2xx answer or after ``attempts`` attempts
        (``retries`` unless given)."""
        attempts = attempts or self.retries
        detail = ""
        for attempt in range(1, attempts + 1):
            try:
                detail = await self._attempt(url, body)
            except Refused as e:
                if self._metrics is not None:
                    self._metrics.push_attempt(failed=True)
                # Not worth another attempt: only a new --push-allow can change the answer.
                return Outcome(False, f"refused: {e}")
            if self._metrics is not None:
                self._metrics.push_attempt(failed=bool(detail))
            if not detail:
                return Outcome(True, "")
            if attempt < attempts:
                await asyncio.sleep(self.backoff(attempt))
        return Outcome(False, detail)

    async def _attempt(self, url: str, body: bytes) -> str:
        """What went wrong, or "" when the target answered 2xx."""
        try:
            async with asyncio.timeout(self._timeout):
                status = await self._client.post(url, body)
        except TimeoutError:
            return "timed out"
        except Refused:
            raise
        except Exception as e:  # connection refused, bad answer, bad URL: all just failures
            return str(e) or type(e).__name__
        return "" if 200 <= status < 300 else f"answered {status}"

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            self._client.close()
