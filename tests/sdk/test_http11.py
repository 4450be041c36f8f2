"""The SDK's keep-alive HTTP/1.1 client against a scripted server: bodies by length and
by chunks, connections the server closes, and reuse of the ones it keeps."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest

from troth.sdk.http11 import Http11Client, ProtocolError

pytestmark = pytest.mark.anyio

Answer = Callable[[bytes], bytes]


class Scripted:
    """A server that answers each request's body with ``answer(body)``."""

    def __init__(self) -> None:
        self.servers: list[asyncio.Server] = []
        self.connections = 0

    async def __call__(self, answer: Answer) -> str:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.connections += 1
            try:
                while True:
                    head = await reader.readuntil(b"\r\n\r\n")
                    length = next(
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length")
                    )
                    reply = answer(await reader.readexactly(length))
                    writer.write(reply)
                    await writer.drain()
                    if b"Connection: close" in reply:
                        break
            except (asyncio.IncompleteReadError, ConnectionError):
                pass
            writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        self.servers.append(server)
        return f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/"


@pytest.fixture
async def serve() -> AsyncIterator[Scripted]:
    scripted = Scripted()
    yield scripted
    for server in scripted.servers:
        server.close()


def by_length(body: bytes, extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n%s" % (len(body), extra, body)


async def test_bodies_by_length_reuse_one_connection(serve):
    url = await serve(lambda body: by_length(body.upper()))
    client = Http11Client(url)
    for word in (b"one", b"two", b"three"):
        response = await client.post(word)
        assert response == (200, word.upper())
    assert serve.connections == 1
    await client.aclose()


async def test_chunked_bodies_and_interim_answers_are_read_whole(serve):
    def chunked(body: bytes) -> bytes:
        return (
            b"HTTP/1.1 100 Continue\r\n\r\n"
            b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"3;ext=1\r\n" + body[:3] + b"\r\n" + b"%x\r\n" % len(body[3:]) + body[3:] + b"\r\n"
            b"0\r\nTrailer: x\r\n\r\n"
        )

    client = Http11Client(await serve(chunked))
    assert await client.post(b"hello world") == (201, b"hello world")
    assert await client.post(b"again!") == (201, b"again!")
    assert serve.connections == 1
    await client.aclose()


async def test_a_connection_the_server_closes_is_not_reused(serve):
    client = Http11Client(await serve(lambda body: by_length(body, b"Connection: close\r\n")))
    assert await client.post(b"a") == (200, b"a")
    assert await client.post(b"b") == (200, b"b")
    assert serve.connections == 2
    await client.aclose()


async def test_an_idle_connection_closed_by_the_server_is_replaced(serve):
    answered: list[bytes] = []

    def answer(body: bytes) -> bytes:
        answered.append(body)
        return by_length(body)

    client = Http11Client(await serve(answer))
    assert await client.post(b"first") == (200, b"first")
    # The pooled connection dies while idle (as when a server times it out): the next
    # request finds it closed before any answer and goes out again on a new connection.
    (idle,) = client._idle
    idle.writer.transport.abort()
    idle.reader.feed_eof()
    assert await client.post(b"second") == (200, b"second")
    assert answered == [b"first", b"second"]
    await client.aclose()


async def test_an_answer_that_is_not_http_is_a_protocol_error(serve):
    client = Http11Client(await serve(lambda body: b"SSH-2.0-nope\r\n\r\n"))
    with pytest.raises(ProtocolError):
        await client.post(b"x")
    await client.aclose()


async def test_no_server_is_an_os_error():
    client = Http11Client("http://127.0.0.1:9/", timeout_ms=2000)
    with pytest.raises(OSError):
        await client.post(b"x")
