"""Remote mode: envelopes over ``POST /`` and messages over ``GET /poll/{group}/{pid}`` (SSE).

The SSE stream is the only way work reaches this process, so losing it silently would
stop the worker: the listener reconnects whenever the stream fails or ends, backing off
exponentially (0.1 s doubling to 30 s) and resetting the backoff once connected.

Several servers on one database are interchangeable, so the network may be given several
URLs (a list, or one string with commas). It uses the first until it fails, then the next,
round and round: a stream that fails reconnects to the next server, and a request that
gets no answer is sent again to the next server (each at most once per request). Sending
again is safe even if the lost request was carried out: creates are idempotent by id, and
task operations are fenced by version, so a repeat is answered 409, which the worker takes
as "not mine any more" (the task's lease lapses and it is run again). With one URL a
request that gets no answer raises ``NetworkError`` at once, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from urllib.parse import quote

import httpx
import msgspec

from troth.protocol.envelope import encode_request
from troth.protocol.requests import Data
from troth.protocol.responses import Reply
from troth.sdk.clock import Clock
from troth.sdk.errors import NetworkError
from troth.sdk.http11 import Http11Client
from troth.sdk.network import (
    OnConnect,
    OnMessage,
    corr_id,
    decode_body,
    decode_message,
    error_message,
)

log = logging.getLogger("troth.sdk")

MIN_BACKOFF = 0.1
MAX_BACKOFF = 30.0


class _Head(msgspec.Struct, rename="camel"):
    corr_id: str
    status: int


class _Envelope(msgspec.Struct):
    kind: str
    head: _Head
    data: msgspec.Raw = msgspec.Raw(b"null")


class HttpNetwork:
    def __init__(
        self,
        url: str | Sequence[str],
        group: str,
        pid: str,
        clock: Clock,
        token: str | None = None,
        timeout: float = 10.0,
    ) -> None:
        self.urls = server_urls(url)
        self._current = 0  # index into urls of the server in use
        self.group = group
        self.pid = pid
        self.clock = clock
        self.token = token
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._client = httpx.AsyncClient(
            headers=headers,
            timeout=httpx.Timeout(timeout),
            limits=httpx.Limits(max_connections=256, max_keepalive_connections=64),
        )
        # Requests go through the lean keep-alive client (see ``http11``), one per server
        # URL; httpx serves the long-lived SSE stream only.
        self._post_headers = {"Content-Type": "application/json", **headers}
        self._posters: dict[str, Http11Client] = {}
        self._timeout = timeout
        self._listener: asyncio.Task[None] | None = None
        self.connected = asyncio.Event()

    @property
    def url(self) -> str:
        """The server in use."""
        return self.urls[self._current]

    def _fail_over(self, failed: str) -> None:
        """Move on from ``failed``, unless a concurrent failure already did."""
        if self.url == failed and len(self.urls) > 1:
            self._current = (self._current + 1) % len(self.urls)
            log.warning("server %s failed; switching to %s", failed, self.url)

    async def send(self, kind: str, data: Data) -> Reply:
        cid = corr_id()
        body = encode_request(kind, data, cid, auth=self.token)
        for attempt in range(len(self.urls)):
            url = self.url
            try:
                response = await self._poster(url).post(body)
                break
            except OSError as e:
                if attempt == len(self.urls) - 1:
                    raise NetworkError(f"{kind}: {type(e).__name__}: {e}") from e
                self._fail_over(url)
        try:
            envelope = msgspec.json.decode(response.body, type=_Envelope)
        except msgspec.DecodeError as e:
            raise NetworkError(
                f"{kind}: HTTP {response.status} without an envelope: {response.body[:200]!r}"
            ) from e
        if envelope.head.corr_id != cid or envelope.kind != kind:
            raise NetworkError(f"{kind}: the response does not echo the request's kind and corrId")
        status = envelope.head.status
        if status in (200, 300):
            return Reply(status, decode_body(kind, status, envelope.data))
        message = msgspec.json.decode(envelope.data)
        return Reply(status, error_message(kind, status, message))

    async def start(self, on_message: OnMessage, on_connect: OnConnect) -> None:
        self._listener = asyncio.create_task(
            self._listen(on_message, on_connect), name="troth-sse-listener"
        )

    async def stop(self) -> None:
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listener
            self._listener = None
        await self._client.aclose()
        for poster in self._posters.values():
            await poster.aclose()

    def _poster(self, url: str) -> Http11Client:
        poster = self._posters.get(url)
        if poster is None:
            poster = Http11Client(f"{url}/", self._post_headers, self._timeout)
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
                    url + path,
                    headers={"Accept": "text/event-stream"},
                    timeout=httpx.Timeout(10.0, read=None),
                ) as response:
                    if response.status_code != 200:
                        raise NetworkError(f"poll answered HTTP {response.status_code}")
                    backoff = MIN_BACKOFF
                    self.connected.set()
                    await on_connect()
                    async for line in response.aiter_lines():
                        if line.startswith("data:"):
                            self._dispatch(line[5:].strip(), on_message)
                log.info("poll stream ended; reconnecting")
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.warning("poll stream failed (%s); reconnecting in %.1f s", e, backoff)
            self.connected.clear()
            self._fail_over(url)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF)

    @staticmethod
    def _dispatch(payload: str, on_message: OnMessage) -> None:
        try:
            message = decode_message(payload)
        except msgspec.DecodeError as e:
            log.warning("dropped an undecodable message (%s): %.200s", e, payload)
            return
        if message is not None:
            on_message(message)


def server_urls(url: str | Sequence[str]) -> list[str]:
    """The server URLs to use, in order: a list, or one string with commas between them."""
    urls = url.split(",") if isinstance(url, str) else list(url)
    urls = [u.strip().rstrip("/") for u in urls if u.strip()]
    if not urls:
        raise ValueError("no server URL given")
    return urls
