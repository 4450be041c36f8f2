"""Remote mode: envelopes over ``POST /`` and messages over ``GET /poll/{group}/{pid}`` (SSE).

The SSE stream is the only way work reaches this process, so losing it silently would
stop the worker: the listener reconnects whenever the stream fails or ends, backing off
exponentially (0.1 s doubling to 30 s) and resetting the backoff once connected.

Several servers on one database are interchangeable, so the network may be given several
URLs (a list, or one string with commas). It uses the first until it fails, then the next,
round and round: a stream that fails reconnects to the next server, and a request that
gets no answer is sent again to the next server at once.

Transient failures are retried here, in one place, for every request the SDK sends: no
answer (connection refused or reset, a timeout), 429 (over the server's ``--rate-limit``)
and 502/503/504 (a proxy with no backend, a server that lost a write race or is starting).
Once every server has been tried, the request waits (the server's ``Retry-After``, else a
backoff from 0.1 s doubling to 2 s, with jitter) and goes round again, until
``request_retry_ms`` have passed since it was first sent; then no answer raises
``NetworkError`` and a 5xx (or 429) is returned as it came.
So a server restart of a few seconds delays callers and steps; it fails none of them, and
a finished step's result is recorded when the server is back instead of being lost.

Sending again is safe even if the lost request was carried out: creates are idempotent by
id, a settle of a settled promise answers the promise as it is, and task operations are
fenced by version, so a repeat is answered 409, which the worker takes as "not mine any
more" (the task's lease lapses and it is run again). Retries are logged at WARNING, at most
one line per ``RETRY_LOG_INTERVAL`` seconds with a count of the retries in between, and
one line when the server answers again, so an outage does not flood the log.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Sequence
from urllib.parse import quote

import httpx
import msgspec

from troth.protocol.envelope import decode_response, encode_request
from troth.protocol.kinds import Kind
from troth.protocol.messages import decode_delivered
from troth.protocol.requests import Data
from troth.protocol.responses import Reply
from troth.sdk.clock import Clock, WallClock
from troth.sdk.closing import close, finish
from troth.sdk.errors import NetworkError, ServerError
from troth.sdk.http11 import Http11Client, Response
from troth.sdk.network import Network, OnConnect, OnMessage, corr_id
from troth.views.executions import Cursor, Execution, ExecutionQuery, Page

log = logging.getLogger(__name__)

MIN_BACKOFF = 0.1
MAX_BACKOFF = 30.0

DEFAULT_REQUEST_RETRY_MS = 30_000  # how long a request keeps being retried before it fails
MAX_REQUEST_BACKOFF = 2.0  # a request's pause between rounds grows to this
RETRY_STATUSES = frozenset({429, 502, 503, 504})  # the server (or its proxy) may answer later
RETRY_LOG_INTERVAL = 5.0  # seconds between warnings about the same outage
ACK_DELAY = 0.01  # seconds an acknowledgement waits for more frames to acknowledge with it


class HttpNetwork(Network):
    def __init__(
        self,
        url: str | Sequence[str],
        group: str,
        pid: str,
        clock: Clock,
        *,
        token: str | None = None,
        timeout_ms: int = 10_000,
        request_retry_ms: int = DEFAULT_REQUEST_RETRY_MS,
        trace_context: Callable[[], dict[str, str]] | None = None,
    ) -> None:
        self.urls = server_urls(url)
        # When the app traces: the current span's context, sent as HTTP headers with each
        # request so that the server's span of it joins the trace (``troth.sdk.tracing``).
        self._trace_context = trace_context
        self._request_retry = request_retry_ms / 1000
        self._outage = _Outage()
        self._current = 0  # index into urls of the server in use
        self.group = group
        self.pid = pid
        self.clock = clock
        self.token = token
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._client = httpx.AsyncClient(
            headers=headers,
            timeout=httpx.Timeout(timeout_ms / 1000),
            limits=httpx.Limits(max_connections=256, max_keepalive_connections=64),
        )
        # Requests go through the lean keep-alive client (see ``http11``), one per server
        # URL; httpx serves the long-lived SSE stream only.
        self._post_headers = {"Content-Type": "application/json", **headers}
        self._posters: dict[str, Http11Client] = {}
        self._timeout_ms = timeout_ms
        self._listener: asyncio.Task[None] | None = None
        self.connected = asyncio.Event()

    async def executions(self, query: ExecutionQuery) -> Page:
        """The server's ``GET /api/executions`` (the console's and the CLI's list)."""
        url = f"{self.url}/api/executions"
        try:
            response = await self._client.get(url, params=query.params())
        except httpx.HTTPError as e:
            raise NetworkError(f"executions list: {type(e).__name__}: {e}") from e
        if response.status_code != 200:
            try:
                message = str(response.json()["error"])
            except (ValueError, KeyError, TypeError):
                message = response.text.strip()
            raise ServerError("executions list", response.status_code, message)
        body = response.json()
        rows = [Execution.from_json(row) for row in body["executions"]]
        return Page(rows, Cursor.parse(body["next"]) if body.get("next") else None)

    def twin(self) -> HttpNetwork:
        """A network to the same servers, as the same process, with connections of its own:
        for another thread's event loop (the heartbeat's, ``troth.sdk.heartbeat``)."""
        return HttpNetwork(
            self.urls,
            self.group,
            self.pid,
            WallClock(),
            token=self.token,
            timeout_ms=self._timeout_ms,
            request_retry_ms=round(self._request_retry * 1000),
        )

    @property
    def url(self) -> str:
        """The server in use."""
        return self.urls[self._current]

    def _fail_over(self, failed: str, quiet: bool = False) -> None:
        """Move on from ``failed``, unless a concurrent failure already did (``quiet``: the
        caller reports the failure itself)."""
        if self.url == failed and len(self.urls) > 1:
            self._current = (self._current + 1) % len(self.urls)
            if not quiet:
                log.warning("server %s failed; switching to %s", failed, self.url)

    async def send(self, kind: Kind, data: Data) -> Reply:
        cid = corr_id()
        body = encode_request(kind, data, cid, auth=self.token)
        headers = b""
        if self._trace_context is not None:
            context = self._trace_context().items()
            headers = "".join(f"{k}: {v}\r\n" for k, v in context).encode("latin-1")
        response = await self._post(kind, body, headers)
        if response.status == 413:
            # Refused before it was read (no envelope): the same request is refused again, so
            # it is an answer, not a failure to reach the server.
            return Reply(413, response.body.decode(errors="replace"))
        try:
            answer = decode_response(response.body)
        except msgspec.DecodeError as e:
            raise NetworkError(
                f"{kind}: HTTP {response.status} without a readable envelope ({e}): "
                f"{response.body[:200]!r}"
            ) from e
        if answer.corr_id != cid or answer.kind != kind:
            raise NetworkError(f"{kind}: the response does not echo the request's kind and corrId")
        return answer.reply

    async def _post(self, kind: Kind, body: bytes, headers: bytes) -> Response:
        """The server's answer to ``body``, retrying transient failures (see the module
        docstring) for up to ``request_retry_ms``."""
        give_up = time.monotonic() + self._request_retry
        backoff = MIN_BACKOFF
        tried = 0  # servers tried since the last pause
        while True:
            url = self.url
            wait: float | None = None
            try:
                response = await self._poster(url).post(body, headers)
            except OSError as e:
                failure = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
                error: OSError | None = e
            else:
                if response.status not in RETRY_STATUSES:
                    self._outage.over(url)
                    return response
                failure, wait, error = f"HTTP {response.status}", response.retry_after, None
            self._fail_over(url, quiet=True)
            tried += 1
            if tried < len(self.urls):
                continue  # the next server, at once
            tried = 0
            remaining = give_up - time.monotonic()
            if remaining <= 0:
                if error is None:
                    return response  # the server's own answer, a 5xx the caller handles
                raise NetworkError(
                    f"{kind}: {failure} (retried for {self._request_retry:g} s)"
                ) from error
            pause = min(backoff * random.uniform(0.5, 1.0) if wait is None else wait, remaining)
            self._outage.retrying(url, kind, failure)
            await asyncio.sleep(pause)
            backoff = min(backoff * 2, MAX_REQUEST_BACKOFF)

    async def start(self, on_message: OnMessage, on_connect: OnConnect) -> None:
        self._listener = asyncio.create_task(
            self._listen(on_message, on_connect), name="troth-sse-listener"
        )

    async def stop(self) -> None:
        """Close the poll stream and every connection; each wait is bounded (``closing``)."""
        if self._listener is not None:
            self._listener.cancel()
            await finish([self._listener], "the poll stream")
            self._listener = None
        await close(self._client.aclose(), "the poll stream's connections")
        for url, poster in self._posters.items():
            await close(poster.aclose(), f"the connections to {url}")

    def _poster(self, url: str) -> Http11Client:
        poster = self._posters.get(url)
        if poster is None:
            poster = Http11Client(
                f"{url}/", headers=self._post_headers, timeout_ms=self._timeout_ms
            )
            self._posters[url] = poster
        return poster

    async def _listen(self, on_message: OnMessage, on_connect: OnConnect) -> None:
        path = f"/poll/{quote(self.group, safe='')}/{quote(self.pid, safe='')}"
        backoff = MIN_BACKOFF
        while True:
            url = self.url
            try:
                async with self._client.stream(
                    "GET",
                    f"{url}{path}?ack=1",
                    headers={"Accept": "text/event-stream"},
                    timeout=httpx.Timeout(10.0, read=None),
                ) as response:
                    if response.status_code != 200:
                        raise NetworkError(f"poll answered HTTP {response.status_code}")
                    backoff = MIN_BACKOFF
                    self.connected.set()
                    await on_connect()
                    acks = _Acks(self._client, url + path, response.headers.get("troth-stream"))
                    try:
                        number = 0
                        async for line in response.aiter_lines():
                            if line.startswith("id:"):
                                number = int(line[3:].strip() or 0)
                            elif line.startswith("data:"):
                                self._dispatch(line[5:].strip(), on_message)
                                acks.handled(number)
                    finally:
                        await acks.close()
                log.debug("poll stream ended; reconnecting")
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.warning(
                    "poll stream from %s failed (%s); reconnecting in %.1f s", url, e, backoff
                )
            self.connected.clear()
            self._fail_over(url)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF)

    @staticmethod
    def _dispatch(payload: str, on_message: OnMessage) -> None:
        try:
            message = decode_delivered(payload)
        except msgspec.DecodeError as e:
            log.warning("dropped an undecodable message (%s): %.200s", e, payload)
            return
        if message is not None:
            on_message(message)


class _Acks:
    """Acknowledges the frames of a stream this process has handled (``POST`` of the highest
    number to the stream's path), so the server stops holding them for redelivery. Frames
    are acknowledged in batches: at most one request in flight, carrying the latest number.
    A server that names no stream (one that does not hold frames) gets no acknowledgements;
    a failed one is not retried, as the server then sends the frames again."""

    def __init__(self, client: httpx.AsyncClient, url: str, stream: str | None) -> None:
        self._client = client
        self._url = url
        self._stream = stream
        self._seen = 0  # the highest frame number handled
        self._sent = 0  # the highest number acknowledged
        self._task: asyncio.Task[None] | None = None

    def handled(self, number: int) -> None:
        if self._stream is None or number <= self._seen:
            return
        self._seen = number
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._send(), name="troth-sse-acks")

    async def _send(self) -> None:
        await asyncio.sleep(ACK_DELAY)  # let frames that arrive together go in one request
        while self._sent < self._seen:
            seen = self._seen
            try:
                response = await self._client.post(
                    self._url, json={"stream": self._stream, "seen": seen}
                )
            except httpx.HTTPError as e:
                log.debug("acknowledging frames up to %d failed: %s", seen, e)
                return
            if response.status_code != 204:
                log.debug("acknowledging frames up to %d: HTTP %d", seen, response.status_code)
                return
            self._sent = seen

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await finish([self._task], "acknowledging the poll stream's frames")


class _Outage:
    """Warnings about failed requests, summarized: the first retry of an outage, then at
    most one line per ``RETRY_LOG_INTERVAL`` with the count since, and its end."""

    def __init__(self) -> None:
        self.retries = 0  # since the outage began
        self.unlogged = 0  # since the last warning
        self.logged_at = 0.0

    def retrying(self, url: str, kind: str, failure: str) -> None:
        self.retries += 1
        self.unlogged += 1
        now = time.monotonic()
        if self.retries > 1 and now - self.logged_at < RETRY_LOG_INTERVAL:
            return
        more = (
            f" ({self.unlogged - 1} more retries since the last warning)"
            if self.retries > 1
            else ""
        )
        log.warning("%s to %s failed (%s); retrying%s", kind, url, failure, more)
        self.logged_at, self.unlogged = now, 0

    def over(self, url: str) -> None:
        if self.retries:
            log.warning("%s answers again (after %d retried requests)", url, self.retries)
            self.retries = self.unlogged = 0


def server_urls(url: str | Sequence[str]) -> list[str]:
    """The server URLs to use, in order: a list, or one string with commas between them.
    ``host:port`` means ``http://host:port`` (as ``curl`` and Temporal's ``--address``
    read it); a scheme other than http(s) is a ``ValueError`` naming the URL."""
    urls = url.split(",") if isinstance(url, str) else list(url)
    urls = [_with_scheme(u.strip().rstrip("/")) for u in urls if u.strip()]
    if not urls:
        raise ValueError("no server URL given")
    return urls


def _with_scheme(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    if not sep:
        return f"http://{url}"
    if scheme.lower() not in ("http", "https") or not rest:
        raise ValueError(f"server URL {url!r}: troth serves http:// or https://")
    return url
