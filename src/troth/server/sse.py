"""``GET /poll/{group}/{id}``: one worker's Server-Sent Events stream.

Frames are exactly ``data: <compact json>\\n\\n`` (what both official SDK parsers split on).
Between messages a comment frame ``: keepalive\\n\\n`` goes out every few seconds: SDKs
ignore it, and writing it is how a connection whose peer vanished gets noticed and
deregistered instead of silently swallowing messages.

A client that acknowledges (troth's SDK) opens the stream with ``?ack=1``: the response
names the stream in a ``troth-stream`` header, each frame carries its number
(``id: n\\ndata: ...\\n\\n``), and the client reports the highest number it has handled with
``POST /poll/{group}/{id}`` and ``{"stream": "<token>", "seen": n}``. See ``troth.server.poll``
for what the acknowledgements decide.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import msgspec

from troth.server.asgi import TEXT, Receive, Send, respond
from troth.server.poll import PollConnection, PollHub, Refused

KEEPALIVE = b": keepalive\n\n"

_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    # Tell buffering proxies (nginx) to pass frames through as they come.
    (b"x-accel-buffering", b"no"),
]


class Ack(msgspec.Struct, forbid_unknown_fields=True):
    stream: str
    seen: int


_decode_ack = msgspec.json.Decoder(Ack).decode


def acknowledges(query: bytes) -> bool:
    """Whether the query string asks for a stream with acknowledgements (``ack=1``)."""
    return b"ack=1" in query.split(b"&")


class _Aborted(logging.Filter):
    """Drop uvicorn's error for a response ended on purpose: dropping a stalled stream
    means returning from the app mid-response, which is the only way ASGI has to close it."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != "ASGI callable returned without completing response."


logging.getLogger("uvicorn.error").addFilter(_Aborted())


async def _close_on_disconnect(receive: Receive, connection: PollConnection) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    connection.close()


async def _write(connection: PollConnection, send: Send, keepalive: float) -> None:
    headers = _HEADERS
    if connection.acks:
        headers = [*headers, (b"troth-stream", connection.token.encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    while not connection.closed:
        pending = await connection.take(keepalive)
        if pending is None:
            if not connection.closed:
                await send({"type": "http.response.body", "body": KEEPALIVE, "more_body": True})
            continue
        if pending.written.done():  # its deliverer gave up waiting
            continue
        try:
            body = connection.frame(pending)
            await send({"type": "http.response.body", "body": body, "more_body": True})
        except BaseException:
            if not pending.written.done():
                pending.written.set_result(False)
            raise
        if not pending.written.done():
            pending.written.set_result(not connection.closed)
    # Closed by the server (shutdown) or the peer; finishing a dead response is harmless.
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def stream(
    hub: PollHub,
    group: str,
    id: str,
    receive: Receive,
    send: Send,
    *,
    keepalive_ms: int,
    acks: bool = False,
    owner: str | None = None,
) -> None:
    try:
        connection = hub.register(group, id, acks, owner)
    except Refused as e:
        await respond(send, e.status, e.message.encode(), TEXT)
        return
    watcher = asyncio.create_task(_close_on_disconnect(receive, connection))
    connection.writer = asyncio.create_task(_write(connection, send, keepalive_ms / 1000))
    try:
        await connection.writer
    except OSError:
        pass  # the peer is gone; nothing to tell it
    except asyncio.CancelledError:
        if not connection.closed or asyncio.current_task().cancelling():  # type: ignore[union-attr]
            raise
        # Aborted (a stalled peer): return mid-response, and the server drops the connection.
    finally:
        hub.unregister(connection)
        connection.writer.cancel()
        watcher.cancel()
        for task in (connection.writer, watcher):
            with contextlib.suppress(asyncio.CancelledError, OSError):
                await task


async def acknowledge(hub: PollHub, group: str, id: str, body: bytes, send: Send) -> None:
    """``POST /poll/{group}/{id}``: a client's acknowledgement of the frames it handled."""
    try:
        ack = _decode_ack(body)
    except msgspec.DecodeError as e:
        await respond(send, 400, f"Invalid acknowledgement: {e}".encode(), TEXT)
        return
    if hub.ack(group, id, ack.stream, ack.seen):
        await respond(send, 204)
    else:
        await respond(send, 404, b"No such stream", TEXT)
