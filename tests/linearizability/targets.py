"""What a history is recorded against: anything that answers request envelopes concurrently.

``ServiceTarget`` drives a storage service in this process (SQLite or PostgreSQL);
``HttpTarget`` drives one or several ``troth serve`` processes, client ``i`` talking to
server ``i mod n``; ``StaleReads`` is a deliberately broken backend, for showing that the
checker rejects what it should.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import httpx
import msgspec

from troth.protocol import BadRequest, decode_request, response_envelope, to_builtins
from troth.protocol.requests import DebugTickRequest
from troth.protocol.responses import Reply
from troth.storage.service import Retriable, Service

Envelope = dict[str, Any]


class Target(Protocol):
    async def call(self, client: int, envelope: Envelope) -> Envelope | None:
        """The response envelope, or None when none arrived (the outcome is unknown)."""
        ...

    async def close(self) -> None: ...


# A fresh target of one backend, for each history (the ``backend`` fixture's value).
Opener = Callable[[], Awaitable[Target]]


class ServiceTarget:
    """Services in this process, answering as ``troth.server.rpc`` would in debug mode.

    Several services on one database stand for several servers: client ``i`` uses service
    ``i mod n``.
    """

    def __init__(self, services: list[Service]) -> None:
        self.services = services

    async def call(self, client: int, envelope: Envelope) -> Envelope | None:
        try:
            request = decode_request(msgspec.json.encode(envelope))
        except BadRequest as e:
            return to_builtins(response_envelope(e.kind, e.corr_id, e.reply()))
        service = self.services[max(client, 0) % len(self.services)]
        try:
            if isinstance(request.data, DebugTickRequest):
                await service.fire_due(request.data.time)
                reply = Reply(200, [])
            else:
                assert request.debug_time is not None, "histories run on debug time"
                reply = await service.handle(request, request.debug_time)
        except Retriable as e:
            reply = Reply(503, f"Temporarily unavailable, retry: {e}")
        except Exception as e:
            reply = Reply(500, f"Internal error: {e}")
        return to_builtins(response_envelope(request.kind, request.corr_id, reply))

    async def close(self) -> None:
        await asyncio.gather(*(service.close() for service in self.services))


class HttpTarget:
    """``troth serve --debug`` processes at ``urls``; their wall-clock timeouts loops are
    paused (``debug.start``), so deadlines fire only through the history's ticks."""

    def __init__(self, urls: list[str]) -> None:
        self.http = [httpx.AsyncClient(base_url=url, timeout=30) for url in urls]

    async def prepare(self) -> None:
        for i in range(len(self.http)):
            response = await self.call(i, envelope("debug.start", {}, f"start{i}"))
            assert response and response["head"]["status"] == 200, response
        response = await self.call(0, envelope("debug.reset", {}, "reset"))
        assert response and response["head"]["status"] == 200, response

    async def call(self, client: int, envelope: Envelope) -> Envelope | None:
        http = self.http[max(client, 0) % len(self.http)]
        try:
            response = await http.post("/", json=envelope)
            return response.json()
        except (httpx.HTTPError, ValueError):
            return None

    async def close(self) -> None:
        await asyncio.gather(*(http.aclose() for http in self.http))


def envelope(kind: str, data: Any, corr_id: str, now: int | None = None) -> Envelope:
    head: dict[str, Any] = {"corrId": corr_id, "version": "2026-04-01"}
    if now is not None:
        head["resonate:debug_time"] = now
    return {"kind": kind, "head": head, "data": data}


class StaleReads:
    """A broken backend: ``promise.get`` sometimes answers what it answered a phase ago.

    It lies only when the lie is provably wrong. After each tick (nothing in flight) it reads
    every promise it has answered for at the tick's instant; a promise's record never returns
    to an earlier value, so once the phase starts with a record other than the one remembered,
    no order of that phase's operations can make the remembered record true again.
    """

    def __init__(self, inner: Target) -> None:
        self.inner = inner
        self.remembered: dict[str, tuple[int, Envelope]] = {}  # id -> (phase now, response)
        self.truth: dict[str, Any] = {}  # id -> observable answer when this phase started
        self.lies = 0

    async def call(self, client: int, envelope: Envelope) -> Envelope | None:
        if envelope["kind"] == "debug.tick":
            response = await self.inner.call(client, envelope)
            await self._learn_truth(envelope["data"]["time"])
            return response
        if envelope["kind"] != "promise.get":
            return await self.inner.call(client, envelope)
        id, now = envelope["data"]["id"], envelope["head"]["resonate:debug_time"]
        old = self.remembered.get(id)
        if old is not None and old[0] < now and _answer(old[1]) != self.truth.get(id):
            self.lies += 1
            head = {**old[1]["head"], "corrId": envelope["head"]["corrId"]}
            return {**old[1], "head": head}
        response = await self.inner.call(client, envelope)
        if response is not None:
            self.remembered[id] = (now, response)
        return response

    async def _learn_truth(self, now: int) -> None:
        for id in self.remembered:
            probe = envelope("promise.get", {"id": id}, f"probe.{id}", now)
            response = await self.inner.call(-1, probe)
            self.truth[id] = _answer(response) if response else None

    async def close(self) -> None:
        await self.inner.close()


def _answer(response: Envelope) -> tuple[int, Any]:
    return response["head"]["status"], response["data"]


class Unanswered:
    """Every ``every``-th request gets a 500, alternately after and instead of running it:
    an honest backend whose answers get lost, to exercise unknown outcomes."""

    def __init__(self, inner: Target, every: int = 5) -> None:
        self.inner = inner
        self.every = every
        self.count = 0

    async def call(self, client: int, envelope: Envelope) -> Envelope | None:
        self.count += 1
        if envelope["kind"] == "debug.tick" or self.count % self.every:
            return await self.inner.call(client, envelope)
        if self.count % (2 * self.every) == 0:
            await self.inner.call(client, envelope)
        head = {"corrId": envelope["head"]["corrId"], "status": 500, "version": "2026-04-01"}
        return {"kind": envelope["kind"], "head": head, "data": "Internal error: lost answer"}

    async def close(self) -> None:
        await self.inner.close()
