"""A real ``troth serve`` in a subprocess, and small real-HTTP clients to talk to it.

``TrothServer`` runs ``python -m troth serve --port <free> --db <tmp>/t.db --debug``
and waits for ``GET /ready``.
``SseClient`` speaks raw HTTP/1.1 over a socket so tests see the exact bytes on the wire.
``PushTarget`` is an HTTP server the test controls, to receive pushed messages.
"""

from __future__ import annotations

import itertools
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

VERSION = "2026-04-01"
FAR = 10**13  # a deadline that never comes during a test (year 2286)
# Tests push to receivers on 127.0.0.1, which the default --push-allow (public) refuses.
LOCAL_PUSH = {"TROTH_PUSH_ALLOW": "public,loopback"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def eventually(check: Callable[[], Any], timeout: float = 5.0, interval: float = 0.05) -> Any:
    """Poll ``check`` until it returns something truthy; fail with its last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s (last: {value!r})")
        time.sleep(interval)


class TrothServer:
    """One ``troth serve`` process on its own port and database file."""

    _corr = itertools.count(1)

    def __init__(
        self, db: Path | str, log: Path, flags: tuple[str, ...], env: dict[str, str]
    ) -> None:
        self.db = db
        self.log = log
        self.flags = flags
        self.env = env
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None
        self.http = httpx.Client(base_url=self.url, timeout=10)
        self.preexec_fn: Callable[[], None] | None = None  # run in the child before exec

    def start(self) -> TrothServer:
        command = [
            sys.executable, "-m", "troth", "serve",
            "--port", str(self.port), "--host", "127.0.0.1", "--db", str(self.db),
            *self.flags,
        ]  # fmt: skip
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                command,
                stdout=log,
                stderr=log,
                env={**LOCAL_PUSH, **os.environ, **self.env},
                preexec_fn=self.preexec_fn,
            )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited {self.process.returncode}:\n{self.output()}")
            try:
                if httpx.get(f"{self.url}/ready", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"server not ready:\n{self.output()}")

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs at all."""
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def terminate(self, timeout: float = 15) -> int:
        assert self.process is not None
        self.process.terminate()
        return self.process.wait(timeout)

    def restart(self) -> TrothServer:
        self.kill()
        return self.start()

    # -- requests ---------------------------------------------------------------------------

    def envelope(self, kind: str, data: Any, **head: Any) -> dict[str, Any]:
        return {
            "kind": kind,
            "head": {"corrId": f"t{next(self._corr)}", "version": VERSION, **head},
            "data": data,
        }

    def send(self, kind: str, data: Any | None = None, **head: Any) -> httpx.Response:
        return self.http.post("/", json=self.envelope(kind, {} if data is None else data, **head))

    def call(self, kind: str, data: Any | None = None, **head: Any) -> tuple[int, Any]:
        """(head.status, data) of one request, checking what every response must satisfy."""
        request = self.envelope(kind, {} if data is None else data, **head)
        response = self.http.post("/", json=request)
        body = response.json()
        assert response.headers["content-type"] == "application/json"
        assert body["kind"] == kind
        assert body["head"]["corrId"] == request["head"]["corrId"]
        assert body["head"]["status"] == response.status_code
        return response.status_code, body["data"]

    def ok(self, kind: str, data: Any | None = None, **head: Any) -> Any:
        status, body = self.call(kind, data, **head)
        assert status == 200, body
        return body

    def snap(self) -> dict[str, Any]:
        return self.ok("debug.snap")

    def create_promise(
        self, id: str, timeout_at: int = FAR, tags: dict[str, str] | None = None, **head: Any
    ) -> dict[str, Any]:
        data = {"id": id, "timeoutAt": timeout_at, "tags": tags or {}}
        return self.ok("promise.create", data, **head)["promise"]

    def close(self) -> None:
        self.kill()
        self.http.close()


# -- SSE ------------------------------------------------------------------------------------


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


# -- HTTP push target -----------------------------------------------------------------------


class PushTarget:
    """A local HTTP server recording every POST; ``fail_with`` makes it answer an error."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self.attempts: list[float] = []
        self.fail_with: int | None = None
        target = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                target.attempts.append(time.monotonic())
                status = target.fail_with or 200
                if status < 300:
                    target.received.append(json.loads(body))
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
