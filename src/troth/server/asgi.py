"""The few raw-ASGI primitives the server needs: read a bounded body, send a whole response.

troth speaks raw ASGI rather than through a framework: ``POST /`` is the hot path of every
SDK call, and a framework's routing and request objects would cost more than the handler.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any

Scope = MutableMapping[str, Any]
Event = MutableMapping[str, Any]  # what ASGI's receive yields and send takes
Receive = Callable[[], Awaitable[Event]]
Send = Callable[[Event], Awaitable[None]]

JSON = b"application/json"
TEXT = b"text/plain; charset=utf-8"


class BodyTooLarge(Exception):
    pass


class Disconnected(Exception):
    pass


def header(scope: Scope, name: bytes) -> bytes | None:
    """A request header's value (``name`` in lower case, as ASGI gives names), or None."""
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value)
    return None


def is_json(scope: Scope) -> bool:
    """Whether the request declares a JSON body: ``application/json``, parameters aside."""
    content_type = header(scope, b"content-type") or b""
    return content_type.split(b";", 1)[0].strip().lower() == JSON


async def read_body(scope: Scope, receive: Receive, limit: int) -> bytes:
    """The request body, refusing (without buffering it) anything longer than ``limit``.

    A declared ``Content-Length`` over the limit is refused before a byte is read; a chunked
    body is refused as soon as the bytes received pass the limit.
    """
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                declared = int(value)
            except ValueError:
                declared = 0
            if declared > limit:
                raise BodyTooLarge
            break
    message = await receive()
    if message["type"] == "http.disconnect":
        raise Disconnected
    body = message.get("body", b"")
    if len(body) > limit:
        raise BodyTooLarge
    if not message.get("more_body", False):
        return body  # the common case: one chunk, no copy
    chunks = [body]
    size = len(body)
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise Disconnected
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def respond(
    send: Send,
    status: int,
    body: bytes = b"",
    content_type: bytes | None = None,
    close: bool = False,
    retry_after: int | None = None,
    extra: Sequence[tuple[bytes, bytes]] = (),
) -> None:
    headers = [(b"content-length", str(len(body)).encode()), *extra]
    if retry_after is not None:
        headers.append((b"retry-after", str(retry_after).encode()))
    if content_type is not None:
        headers.append((b"content-type", content_type))
    if close:
        # The rest of a refused body is still on the wire; do not reuse the connection.
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
