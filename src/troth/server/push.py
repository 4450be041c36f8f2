"""HTTP push: POST a message to an ``http://`` or ``https://`` address.

One delivery round makes up to ``retries`` attempts, waiting ``backoff`` ms before the
second and doubling up to ``backoff_max``; a 2xx answer ends the round in success, anything
else (another status, a refused connection, a timeout) counts as a failed attempt. Only
``concurrency`` requests are in flight at once, so a burst of messages to a slow target
cannot exhaust sockets; waiting for a slot does not count against the request timeout.
"""

from __future__ import annotations

import asyncio
import logging

import httpx

log = logging.getLogger("troth.push")

_HEADERS = {"content-type": "application/json"}


class Pusher:
    def __init__(
        self,
        concurrency: int,
        timeout_ms: int,
        retries: int,
        backoff_ms: int,
        backoff_max_ms: int,
    ) -> None:
        self._slots = asyncio.Semaphore(concurrency)
        self.retries = max(1, retries)
        self._backoff = backoff_ms / 1000
        self._backoff_max = backoff_max_ms / 1000
        self._timeout = timeout_ms / 1000
        self._client = httpx.AsyncClient(
            timeout=timeout_ms / 1000,
            limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=64),
            follow_redirects=False,
        )

    def backoff(self, failures: int) -> float:
        """Seconds to wait after ``failures`` consecutive failures (exponential, capped)."""
        return min(self._backoff * 2 ** max(0, failures - 1), self._backoff_max)

    def round_time(self) -> float:
        """Seconds one round takes at most, not counting waits for a free slot."""
        waits = sum(self.backoff(attempt) for attempt in range(1, self.retries))
        return self.retries * self._timeout + waits

    async def push(self, url: str, body: bytes) -> bool:
        """One delivery round; True once the target answered 2xx."""
        for attempt in range(1, self.retries + 1):
            if await self._attempt(url, body):
                return True
            if attempt < self.retries:
                await asyncio.sleep(self.backoff(attempt))
        return False

    async def _attempt(self, url: str, body: bytes) -> bool:
        async with self._slots:
            try:
                response = await self._client.post(url, content=body, headers=_HEADERS)
            except Exception as e:  # connection refused, timeout, bad URL: all just failures
                log.info("push to %s failed: %s", url, str(e) or type(e).__name__)
                return False
        if 200 <= response.status_code < 300:
            return True
        log.info("push to %s answered %d", url, response.status_code)
        return False

    async def close(self) -> None:
        await self._client.aclose()
