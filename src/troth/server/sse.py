"""``GET /poll/{group}/{id}``: one worker's Server-Sent Events stream.

Frames are exactly ``data: <compact json>\\n\\n`` (what both official SDK parsers split on).
Between messages a comment frame ``: keepalive\\n\\n`` goes out every few seconds: SDKs
ignore it, and writing it is how a connection whose peer vanished gets noticed and
deregistered instead of silently swallowing messages.
"""

from __future__ import annotations

import asyncio
import contextlib

from troth.server.asgi import TEXT, Receive, Send, respond
from troth.server.poll import PollConnection, PollHub

KEEPALIVE = b": keepalive\n\n"

_START = {
    "type": "http.response.start",
    "status": 200,
    "headers": [
        (b"content-type", b"text/event-stream"),
        (b"cache-control", b"no-cache"),
        # Tell buffering proxies (nginx) to pass frames through as they come.
        (b"x-accel-buffering", b"no"),
    ],
}


def frame(message_json: bytes) -> bytes:
    return b"data: " + message_json + b"\n\n"


async def _close_on_disconnect(receive: Receive, connection: PollConnection) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    connection.close()


async def stream(
    hub: PollHub, group: str, id: str, receive: Receive, send: Send, keepalive: float
) -> None:
    connection = hub.register(group, id)
    if connection is None:
        await respond(send, 503, b"Poll registration at capacity", TEXT)
        return
    watcher = asyncio.create_task(_close_on_disconnect(receive, connection))
    try:
        await send(_START)
        while not connection.closed:
            pending = await connection.take(keepalive)
            if pending is None:
                if not connection.closed:
                    await send({"type": "http.response.body", "body": KEEPALIVE, "more_body": True})
                continue
            if pending.written.done():  # its deliverer gave up waiting
                continue
            try:
                await send({"type": "http.response.body", "body": pending.frame, "more_body": True})
            except BaseException:
                if not pending.written.done():
                    pending.written.set_result(False)
                raise
            if not pending.written.done():
                pending.written.set_result(not connection.closed)
        # Closed by the server (shutdown) or the peer; finishing a dead response is harmless.
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    except OSError:
        pass  # the peer is gone; nothing to tell it
    finally:
        hub.unregister(connection)
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
