"""troth's SDK acknowledges the frames of its SSE stream (``?ack=1``), so the server drops
an unblock as soon as the SDK has it instead of holding it for redelivery
(docs/delivery.md, "Unblocks")."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from datetime import timedelta

import httpx
import pytest

from tests.support.servers import TrothServer
from troth import Context, Troth

# Slow: a troth serve process.
pytestmark = pytest.mark.slow


def unblocks(server: TrothServer) -> list[dict[str, object]]:
    envelope = {
        "kind": "debug.snap",
        "head": {"corrId": "snap", "version": "2026-04-01"},
        "data": {},
    }
    response = httpx.post(server.url, json=envelope, timeout=5)
    return [m for m in response.json()["data"]["messages"] if m["message"]["kind"] == "unblock"]


@pytest.mark.anyio
async def test_the_sdk_acknowledges_unblocks_so_the_server_lets_them_go(
    start_server: Callable[..., TrothServer],
) -> None:
    # A long hold: without the SDK's acknowledgement the unblock would stay a minute.
    server = start_server("--poll-unblock-hold", "60000")
    app = Troth(url=server.url, group=f"g{uuid.uuid4().hex[:8]}")

    @app.register
    async def nap(ctx: Context) -> int:
        await ctx.sleep(timedelta(milliseconds=300))
        return 7

    async with app:
        assert await app.run(f"nap-{uuid.uuid4().hex[:6]}", nap).result() == 7
        deadline = time.monotonic() + 5
        while (pending := unblocks(server)) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert pending == []
    assert "not acknowledged" not in server.log.read_text()
