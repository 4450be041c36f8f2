"""An HTTP push target the test controls: a local server that records what it is sent."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class PushTarget:
    """A local HTTP server recording every POST (its body once accepted, and the
    ``Authorization`` header it came with); ``fail_with`` makes it answer an error."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self.authorizations: list[str | None] = []
        self.attempts: list[float] = []
        self.fail_with: int | None = None
        target = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                target.attempts.append(time.monotonic())
                target.authorizations.append(self.headers.get("authorization"))
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
