"""A machine over HTTP: ``apply(envelope)`` POSTs to a live server and returns its envelope.

The scenarios and the differential test drive anything with ``apply``; this one is the real
server, so every call also checks what the wire must satisfy on every response: the HTTP
status equals ``head.status``, the body is JSON, the envelope echoes kind and corrId, and it
reads back as its kind's typed reply (``decode_response``, as the SDK reads it).
One ``httpx.Client`` keeps one keep-alive connection, so a step costs a round trip, not a
TCP handshake.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx

from troth.protocol import decode_response

Envelope = dict[str, Any]

# The body limit the conformance server runs with: small enough that the bad-input fuzz
# crosses it cheaply, far above any valid request these tests send.
MAX_BODY_BYTES = 64 * 1024
# Its retry timeout: the one the scenarios and the oracle assume (Lean's default).
RETRY_TIMEOUT = 5000


class HttpMachine:
    def __init__(self, url: str) -> None:
        self.http = httpx.Client(base_url=url, timeout=30)

    def post(self, body: bytes | Iterator[bytes] | Envelope) -> httpx.Response:
        """POST an envelope as JSON, or raw bytes (an iterator of them is sent chunked)."""
        if not isinstance(body, dict):
            headers = {"content-type": "application/json"}
            return self.http.post("/", content=body, headers=headers)
        return self.http.post("/", json=body)

    def apply(self, envelope: Envelope) -> Envelope:
        response = self.post(envelope)
        assert response.headers["content-type"] == "application/json", response.text
        answer: Envelope = response.json()
        assert answer["head"]["status"] == response.status_code, (envelope, answer)
        assert answer["kind"] == envelope["kind"], (envelope, answer)
        assert answer["head"]["corrId"] == envelope["head"]["corrId"], (envelope, answer)
        decode_response(response.content)  # raises if the data is not the kind's type
        return answer

    def ok(self, kind: str, data: dict[str, Any] | None = None) -> Any:
        envelope = {"kind": kind, "head": {"corrId": kind, "version": "2026-04-01"}}
        answer = self.apply({**envelope, "data": data or {}})
        assert answer["head"]["status"] == 200, answer
        return answer["data"]

    def fresh(self) -> None:
        """An empty machine whose timeouts fire only through ``debug.tick``.

        Pause first: the workload's instants lie years before the wall clock, so a running
        loop would fire every deadline the moment it is written.
        """
        assert self.ok("debug.start") == {}
        assert self.ok("debug.reset") == {}

    def close(self) -> None:
        self.http.close()
