"""A small keep-alive HTTP/1.1 client for the one request the SDK sends all the time.

Every protocol request is a ``POST`` of a JSON envelope to one URL, so a durable function
pays one round trip per step. httpx (which this SDK still uses for the SSE stream) costs
far more CPU per request than that round trip on a small machine: each request walks its
connection pool (a readability check per idle connection), and httpcore's async-library
detection attempts an import on every request, which fails, and failed imports are not
cached. Measured with 16 executions in flight, that was milliseconds of CPU per request,
more than the server spent on it. Here a request is one write and two or three buffered
reads on a pooled ``asyncio`` stream.

What it supports is what a conformant server may answer: ``Content-Length`` or chunked
bodies, ``Connection: close``, HTTP/1.0 peers, and TLS for ``https`` URLs. A request that
fails on a reused connection before any byte of the answer arrived is sent once more on a
new connection (the server closed an idle connection as it was reused); everything else
raises ``OSError``/``TimeoutError`` to the caller.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from typing import NamedTuple
from urllib.parse import urlsplit

# Header block and chunk-size lines larger than this mean the peer is not a protocol server.
_LIMIT = 1 << 16


class _Answer(NamedTuple):
    status: int
    body: bytes


class Response(_Answer):
    """The status and body (a pair, as callers unpack it), and the seconds a ``503`` or
    ``429`` asked the client to wait before sending again (``Retry-After``), if it did."""

    retry_after: float | None = None


class ProtocolError(OSError):
    """The peer answered something that is not HTTP/1.1."""


class _Stale(Exception):
    """A reused connection closed before answering: safe to send the request again."""


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    def close(self) -> None:
        self.writer.close()

    async def exchange(self, request: bytes) -> tuple[Response, bool]:
        """Send ``request``; the response and whether the connection may be reused."""
        self.writer.write(request)
        try:
            head = await self.reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as e:
            if not e.partial:
                raise _Stale from e
            raise
        except ConnectionError as e:
            raise _Stale from e
        status, headers, version = _parse_head(head)
        while 100 <= status < 200:  # an interim answer (100 Continue): the real one follows
            head = await self.reader.readuntil(b"\r\n\r\n")
            status, headers, version = _parse_head(head)
        reusable = version == b"HTTP/1.1"
        connection = headers.get(b"connection", b"").lower()
        if b"close" in connection:
            reusable = False
        elif b"keep-alive" in connection:
            reusable = True
        if b"chunked" in headers.get(b"transfer-encoding", b"").lower():
            body = await self._chunked()
        elif (length := headers.get(b"content-length")) is not None:
            body = await self.reader.readexactly(int(length))
        else:
            body = await self.reader.read()  # delimited by the end of the connection
            reusable = False
        response = Response(status, body)
        response.retry_after = _retry_after(headers)
        return response, reusable

    async def _chunked(self) -> bytes:
        parts: list[bytes] = []
        while True:
            line = await self.reader.readuntil(b"\r\n")
            size = int(line.split(b";", 1)[0].strip(), 16)
            if size == 0:
                while await self.reader.readuntil(b"\r\n") != b"\r\n":
                    pass  # trailers: not used by the protocol
                return b"".join(parts)
            parts.append(await self.reader.readexactly(size))
            await self.reader.readexactly(2)


def _parse_head(head: bytes) -> tuple[int, dict[bytes, bytes], bytes]:
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
        raise ProtocolError(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
    headers: dict[bytes, bytes] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return int(parts[1]), headers, parts[0]


def _retry_after(headers: dict[bytes, bytes]) -> float | None:
    """``Retry-After`` in seconds; the HTTP-date form is not used by protocol servers."""
    try:
        seconds = float(headers[b"retry-after"])
    except (KeyError, ValueError):
        return None
    return seconds if seconds >= 0 else None


class Http11Client:
    """POSTs to one URL over at most ``max_connections`` pooled keep-alive connections."""

    def __init__(
        self,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        timeout_ms: int = 10_000,
        max_connections: int = 256,
        max_idle: int = 64,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        self._tls = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._tls else 80)
        self._timeout = timeout_ms / 1000
        self._max_idle = max_idle
        self._slots = asyncio.Semaphore(max_connections)
        self._idle: list[_Connection] = []
        default_port = self._port == (443 if self._tls else 80)
        netloc = parts.netloc.rpartition("@")[2]  # never send userinfo in Host
        host = netloc if not default_port else self._host
        lines = [f"POST {parts.path or '/'} HTTP/1.1", f"Host: {host}"]
        lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
        self._head = "\r\n".join(lines).encode("latin-1") + b"\r\nContent-Length: "

    async def post(self, body: bytes, headers: bytes = b"") -> Response:
        """One request, with ``headers`` (``Name: value\\r\\n`` lines) beside the client's
        own; raises ``OSError`` (``TimeoutError`` included) when it got no answer."""
        try:
            return await self._post(body, headers)
        except (EOFError, ValueError, asyncio.LimitOverrunError) as e:
            raise ProtocolError(f"malformed HTTP answer: {type(e).__name__}: {e}") from e

    async def _post(self, body: bytes, headers: bytes) -> Response:
        request = self._head + str(len(body)).encode() + b"\r\n" + headers + b"\r\n" + body
        async with self._slots, asyncio.timeout(self._timeout):
            while self._idle:
                connection = self._idle.pop()
                try:
                    return await self._exchange(connection, request)
                except _Stale:
                    continue  # closed while idle; try the next one
            try:
                return await self._exchange(await self._connect(), request)
            except _Stale as e:
                raise ConnectionResetError("the server closed the connection") from e

    async def _exchange(self, connection: _Connection, request: bytes) -> Response:
        reusable = False
        try:
            response, reusable = await connection.exchange(request)
            return response
        finally:
            # A failed or cancelled exchange leaves the stream in an unknown state.
            if reusable and len(self._idle) < self._max_idle:
                self._idle.append(connection)
            else:
                connection.close()

    async def _connect(self) -> _Connection:
        context = ssl.create_default_context() if self._tls else None
        reader, writer = await asyncio.open_connection(
            self._host, self._port, ssl=context, limit=_LIMIT
        )
        return _Connection(reader, writer)

    async def aclose(self) -> None:
        idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()
        for connection in idle:
            with contextlib.suppress(Exception):
                await connection.writer.wait_closed()
