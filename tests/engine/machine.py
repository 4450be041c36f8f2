"""Drive the engine through ``SqliteService`` on a real temp file, synchronously.

Requests go through the real envelope decoder, so each test sends what a client would;
answers come back as plain JSON-shaped values, as a client would read them.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import msgspec

from troth.protocol.envelope import VERSION, decode_request, response_envelope, to_builtins
from troth.storage.sqlite import SqliteService

R = 5000  # the retry timeout every test machine runs with
TARGET = "poll://any@workers"


class Machine:
    def __init__(self, path: Path, retry_timeout: int = R) -> None:
        self.loop = asyncio.new_event_loop()
        self.service = SqliteService(str(path), retry_timeout=retry_timeout)

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def call(self, kind: str, data: dict[str, Any], now: int = 0) -> tuple[int, Any]:
        """Send one request at ``now``; answer (status, data) as on the wire."""
        body = msgspec.json.encode(
            {"kind": kind, "head": {"corrId": "c", "version": VERSION}, "data": data}
        )
        reply = self.run(self.service.handle(decode_request(body), now))
        return reply.status, to_builtins(response_envelope(kind, "c", reply).data)

    def ok(self, kind: str, data: dict[str, Any], now: int = 0) -> Any:
        """Send a request that must answer 200; return its data."""
        status, body = self.call(kind, data, now)
        assert status == 200, (status, body)
        return body

    def snap(self) -> dict[str, Any]:
        return to_builtins(self.run(self.service.snapshot()))

    def tick(self, now: int) -> int:
        return self.run(self.service.fire_due(now))

    def close(self) -> None:
        self.run(self.service.close())
        self.loop.close()

    # -- shorthands for the set-ups most tests need ------------------------------------------

    def create(
        self, id: str, timeout_at: int = 100_000, now: int = 0, tags: dict[str, str] | None = None
    ) -> Any:
        data = {"id": id, "timeoutAt": timeout_at, "tags": tags or {}}
        return self.ok("promise.create", data, now)["promise"]

    def create_task(
        self,
        id: str,
        timeout_at: int = 100_000,
        now: int = 0,
        pid: str = "w1",
        ttl: int = 1000,
        tags: dict[str, str] | None = None,
    ) -> Any:
        """task.create of a targeted promise: the caller holds it at version 1."""
        action = {
            "kind": "promise.create",
            "head": {},
            "data": {
                "id": id,
                "timeoutAt": timeout_at,
                "tags": {"resonate:target": TARGET, **(tags or {})},
            },
        }
        return self.ok("task.create", {"pid": pid, "ttl": ttl, "action": action}, now)


def settle_action(id: str, state: str = "resolved", data: str | None = None) -> dict[str, Any]:
    value = {} if data is None else {"data": data}
    return {
        "kind": "promise.settle",
        "head": {},
        "data": {"id": id, "state": state, "value": value},
    }


def awaits(task: str, *awaited: str) -> list[dict[str, Any]]:
    return [
        {"kind": "promise.register_callback", "head": {}, "data": {"awaited": a, "awaiter": task}}
        for a in awaited
    ]
