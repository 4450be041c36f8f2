"""``--rate-limit``: at most N requests per second from one client address, else 429.

A token bucket per client: it holds up to N tokens (a burst of one second's worth), refills
at N per second, and each request takes one. A request finding it empty is answered 429 with
``Retry-After``: the whole seconds until a token is back. IPv4 clients are told apart by
address, IPv6 clients by their /64 (one host usually holds a whole /64, so counting single
addresses would let it spread its requests over millions). The address is the TCP peer's:
behind a proxy every client shares the proxy's, so limit at the proxy instead.

Buckets that have refilled are forgotten (a full bucket is what a new client gets anyway),
so memory holds only the clients of about the last second.
"""

from __future__ import annotations

import ipaddress
import math
import time
from typing import Any

from troth.server.asgi import TEXT, Receive, Scope, Send, respond

_PRUNE_AT = 4096  # buckets kept before the full ones are swept out


def client_key(scope: Scope) -> str:
    client = scope.get("client")
    host = client[0] if client else ""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host  # a Unix socket, or no peer known: one shared bucket
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is None:
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else address)


class RateLimit:
    """ASGI middleware in front of ``app``; lifespan events pass through."""

    def __init__(self, app: Any, per_second: int) -> None:
        self.app = app
        self.rate = float(per_second)
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, at)
        self._prune_at = _PRUNE_AT

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            wait = self.take(client_key(scope), time.monotonic())
            if wait:
                message = f"Too many requests: the limit is {self.rate:g} per second\n"
                retry = max(1, math.ceil(wait))
                await respond(send, 429, message.encode(), TEXT, retry_after=retry)
                return
        await self.app(scope, receive, send)

    def take(self, key: str, now: float) -> float:
        """Take a token for ``key``: 0 when there was one, else the seconds until one."""
        tokens, at = self._buckets.get(key, (self.rate, now))
        tokens = min(self.rate, tokens + (now - at) * self.rate)
        if tokens < 1:
            self._buckets[key] = (tokens, now)
            return (1 - tokens) / self.rate
        self._buckets[key] = (tokens - 1, now)
        if len(self._buckets) > self._prune_at:
            self._prune(now)
        return 0.0

    def _prune(self, now: float) -> None:
        full = [
            key
            for key, (tokens, at) in self._buckets.items()
            if tokens + (now - at) * self.rate >= self.rate
        ]
        for key in full:
            del self._buckets[key]
        # Many clients within a second: sweep again only when they have doubled, so a
        # request costs O(1) amortized whatever their number.
        self._prune_at = max(_PRUNE_AT, 2 * len(self._buckets))
