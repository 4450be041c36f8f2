"""An SSE client that sees the exact bytes on the wire: ``GET /poll/{group}/{id}`` over a
raw HTTP/1.1 socket."""

from __future__ import annotations

import json
import socket
import struct
import time
from typing import Any

import httpx


class SseClient:
    """``GET /poll/{group}/{id}`` over a raw socket, de-chunking the response body.

    uvicorn writes each ASGI body message as one HTTP chunk, so ``chunk()`` returns exactly
    what the server sent in one write: one SSE frame.
    """

    def __init__(
        self, port: int, group: str, id: str, path: str | None = None, token: str | None = None
    ) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        target = path or f"/poll/{group}/{id}"
        auth = f"Authorization: Bearer {token}\r\n" if token else ""
        self.sock.sendall(
            f"GET {target} HTTP/1.1\r\nHost: test\r\nAccept: text/event-stream\r\n{auth}\r\n"
            .encode()
        )
        self.buffer = b""
        head = self._until(b"\r\n\r\n", timeout=10).decode()
        status_line, *lines = head.split("\r\n")
        self.status = int(status_line.split()[1])
        self.headers = {
            k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines if line)
        }
        if self.headers.get("content-length"):
            self.body = self._exactly(int(self.headers["content-length"]), timeout=10)

    def _fill(self, timeout: float) -> None:
        self.sock.settimeout(timeout)
        data = self.sock.recv(65536)
        if not data:
            raise EOFError("connection closed")
        self.buffer += data

    def _until(self, marker: bytes, timeout: float) -> bytes:
        deadline = time.monotonic() + timeout
        while marker not in self.buffer:
            self._fill(max(0.001, deadline - time.monotonic()))
        head, _, self.buffer = self.buffer.partition(marker)
        return head

    def _exactly(self, n: int, timeout: float) -> bytes:
        deadline = time.monotonic() + timeout
        while len(self.buffer) < n:
            self._fill(max(0.001, deadline - time.monotonic()))
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def chunk(self, timeout: float = 5) -> bytes:
        """The next body chunk; b"" is the terminating chunk (the stream ended)."""
        size = int(self._until(b"\r\n", timeout), 16)
        data = self._exactly(size, timeout)
        assert self._exactly(2, timeout) == b"\r\n"
        return data

    def message(self, timeout: float = 5) -> dict[str, Any]:
        """The next ``data:`` frame as JSON, skipping keepalive comments."""
        deadline = time.monotonic() + timeout
        while True:
            frame = self.chunk(max(0.001, deadline - time.monotonic()))
            if frame.startswith(b":"):
                continue
            assert frame.startswith(b"data: ") and frame.endswith(b"\n\n"), frame
            return json.loads(frame[len(b"data: ") : -2])

    def no_message(self, within: float) -> None:
        """Assert nothing but keepalives arrives for ``within`` seconds."""
        try:
            message = self.message(within)
        except TimeoutError:
            return
        raise AssertionError(f"unexpected message {message}")

    def numbered(self, timeout: float = 5) -> tuple[int, dict[str, Any]]:
        """The next frame of a stream opened with ``?ack=1``: its number and its JSON."""
        deadline = time.monotonic() + timeout
        while True:
            frame = self.chunk(max(0.001, deadline - time.monotonic()))
            if frame.startswith(b":"):
                continue
            id_line, data_line = frame.split(b"\n", 1)
            assert id_line.startswith(b"id: ") and data_line.startswith(b"data: "), frame
            return int(id_line[4:]), json.loads(data_line[len(b"data: ") : -2])

    def ack(self, port: int, group: str, id: str, seen: int) -> int:
        """Acknowledge frames up to ``seen``; the HTTP status."""
        body = {"stream": self.headers["troth-stream"], "seen": seen}
        return httpx.post(f"http://127.0.0.1:{port}/poll/{group}/{id}", json=body).status_code

    def kill(self) -> None:
        """Vanish as a killed process does: the peer sees a reset, and whatever was in this
        socket's receive buffer is gone unread."""
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.sock.close()

    def close(self) -> None:
        self.sock.close()
