"""The simulated wire: ``SimNetwork`` endpoints for the SDK, and the ``Wire`` between them
and the server, which loses, duplicates and delays what it carries.

A request is encoded as the SDK's HTTP transport would encode it and reaches the server
after a hop (or never); the response envelope comes back after another hop (or never)
and is decoded as that transport decodes it (``decode_response``). A sender whose request
or reply was lost gets a ``NetworkError`` after ``timeout_ms``, as an HTTP client's
timeout would give it. Messages (execute, unblock) are routed as the poll hub routes
them — ``uni`` to the named process, ``any`` to the named process if it is connected,
else to any process of the group — and travel as the SSE payload the SDK decodes with
``decode_delivered``.

A server restart cuts every connection: a request on the way (or sent while the server is
down) fails after a hop, as a refused or reset connection does; a reply or message still
on the way is lost with its connection; and each process's message stream reconnects a
little after the server is back, calling ``on_connect`` as the SDK's listener does.
"""

from __future__ import annotations

import asyncio
import random
from functools import partial
from typing import Any

import msgspec

from troth.oracle.state import OutboxEntry
from troth.protocol.addresses import parse_poll
from troth.protocol.envelope import decode_response
from troth.protocol.kinds import Kind
from troth.protocol.messages import decode_delivered
from troth.protocol.requests import Data
from troth.protocol.responses import Reply
from troth.sdk.errors import NetworkError
from troth.sdk.network import Network, OnConnect, OnMessage, corr_id

from .faults import Faults
from .scheduler import Scheduler
from .server import SimServer


class SimNetwork(Network):
    """One process's end of the wire (a ``troth.sdk.network.Network``)."""

    def __init__(self, wire: Wire, group: str, pid: str) -> None:
        self.wire = wire
        self.group = group
        self.pid = pid
        self.clock = wire.sched
        wire.wire_ends.append(self)
        self.alive = True
        self.stopping = False  # its app is stopping gracefully (for the tally)
        self.stopped = False  # its app stopped: the stream stays closed
        self.on_message: OnMessage | None = None
        self.on_connect: OnConnect | None = None

    async def send(self, kind: Kind, data: Data) -> Reply:
        return await self.wire.send(self, kind, data)

    async def start(self, on_message: OnMessage, on_connect: OnConnect) -> None:
        self.on_message = on_message
        self.on_connect = on_connect
        if self.wire.server.down:
            return  # the stream connects once the server is back (``Wire.back``)
        self.wire.connected.append(self)
        await on_connect()

    async def stop(self) -> None:
        self.stopped = True
        self.disconnect()

    def disconnect(self) -> None:
        if self in self.wire.connected:
            self.wire.connected.remove(self)


class Wire:
    def __init__(
        self, sched: Scheduler, server: SimServer, faults: Faults, rng: random.Random
    ) -> None:
        self.sched = sched
        self.server = server
        self.faults = faults
        self.rng = rng
        self.connected: list[SimNetwork] = []  # in connection order
        self.wire_ends: list[SimNetwork] = []  # every process's end, in creation order
        self.halts: list[tuple[str, str]] = []  # (pid, task id) of every task.halt applied

    # -- requests ---------------------------------------------------------------------------

    async def send(self, sender: SimNetwork, kind: str, data: Data) -> Reply:
        if not sender.alive:
            # A crashed process sends nothing; its tasks are being cancelled.
            await asyncio.get_running_loop().create_future()
        reply: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        label = f"{sender.pid} {kind} {describe(kind, data)}"
        if sender.stopping and kind == "task.release":
            self.server.stats["task.release while stopping"] += 1
        if self.faults.happens(self.rng, self.faults.drop_request):
            self.sched.log(f"{label}: request lost")
            self.server.stats["request lost"] += 1
            self.sched.after(self.faults.timeout_ms, partial(_fail, reply, kind, "request lost"))
        else:
            arrive = partial(self._arrive, reply, label, kind, data, self.server.epoch)
            self.sched.after(self.faults.hop(self.rng), arrive)
        return await reply

    def _arrive(
        self, reply: asyncio.Future[Reply], label: str, kind: str, data: Data, epoch: int
    ) -> None:
        if self.server.down or self.server.epoch != epoch:
            self.sched.log(f"{label}: connection refused or reset (server restarting)")
            self.server.stats["request cut by a restart"] += 1
            why = "connection refused (server restarting)"
            self.sched.after(self.faults.hop(self.rng), partial(_fail, reply, kind, why))
            return
        response, sent = self.server.request(kind, data, corr_id(), self.sched.now())
        status = response["head"]["status"]
        if kind == "task.halt" and status == 200:
            self.halts.append((label.split()[0], data.id))
        self.route(sent)
        if self.faults.happens(self.rng, self.faults.drop_reply):
            self.sched.log(f"{label} -> {status}, reply lost")
            self.server.stats["reply lost"] += 1
            self.sched.after(self.faults.timeout_ms, partial(_fail, reply, kind, "reply lost"))
            return
        self.sched.log(f"{label} -> {status}")
        answer = _decode(kind, response)
        back = partial(self._answer, reply, label, kind, answer, self.server.epoch)
        self.sched.after(self.faults.hop(self.rng), back)

    def _answer(
        self, reply: asyncio.Future[Reply], label: str, kind: str, answer: Reply, epoch: int
    ) -> None:
        if self.server.epoch != epoch:  # the connection died with the server
            self.sched.log(f"{label}: reply lost in a restart")
            self.server.stats["reply cut by a restart"] += 1
            _fail(reply, kind, "connection reset (server restarting)")
            return
        if not reply.done():  # the sender may have crashed meanwhile
            reply.set_result(answer)

    # -- restarts ---------------------------------------------------------------------------

    def restart(self) -> None:
        self.server.restart()
        self.sched.log(f"server goes down ({len(self.connected)} streams cut)")
        self.connected.clear()

    def back(self) -> None:
        """The server is up again: every running process's stream reconnects soon."""
        self.server.back()
        self.sched.log("server is back")
        for network in self.wire_ends:
            if network.alive and not network.stopped and network.on_connect is not None:
                self.sched.after(self.rng.randint(50, 1000), partial(self._reconnect, network))

    def _reconnect(self, network: SimNetwork) -> None:
        if self.server.down or network in self.connected:
            return  # down again: the next ``back`` reconnects it
        if not network.alive or network.stopped or network.on_connect is None:
            return
        self.connected.append(network)
        self.sched.log(f"{network.pid} reconnects its stream")
        self.sched.spawn(network.pid, network.on_connect())

    # -- messages ---------------------------------------------------------------------------

    def route(self, entries: list[OutboxEntry]) -> None:
        for entry in entries:
            message = entry.message
            payload = msgspec.json.encode(message)
            what = f"{message.kind} {_subject(message.data)} to {entry.address}"
            recipient = self._recipient(entry.address)
            if recipient is None:
                self.sched.log(f"{what}: nobody connected")
                continue
            if self.faults.happens(self.rng, self.faults.drop_message):
                self.sched.log(f"{what}: lost")
                self.server.stats["message lost"] += 1
                continue
            copies = 1
            if self.faults.happens(self.rng, self.faults.duplicate_message):
                copies = 2
                self.server.stats["message duplicated"] += 1
            for _ in range(copies):
                hand = partial(self._hand, recipient, payload, what, self.server.epoch)
                self.sched.after(self.faults.hop(self.rng), hand)

    def _recipient(self, address: str) -> SimNetwork | None:
        poll = parse_poll(address)
        assert poll is not None, f"the simulation delivers only to poll addresses: {address}"
        group = [n for n in self.connected if n.group == poll.group]
        named = [n for n in group if n.pid == poll.id]
        if named or poll.cast == "uni":
            return named[0] if named else None
        return self.rng.choice(group) if group else None

    def _hand(self, recipient: SimNetwork, payload: bytes, what: str, epoch: int) -> None:
        if not recipient.alive or recipient.on_message is None:
            self.sched.log(f"{what}: recipient {recipient.pid} is gone")
            return
        if self.server.epoch != epoch or recipient not in self.connected:
            self.sched.log(f"{what}: lost with {recipient.pid}'s stream")
            self.server.stats["message cut"] += 1
            return
        self.sched.log(f"{what}: delivered to {recipient.pid}")
        message = decode_delivered(payload)
        assert message is not None
        self.sched.call_as(recipient.pid, recipient.on_message, message)


def _decode(kind: str, response: dict[str, Any]) -> Reply:
    """A response envelope as the SDK's HTTP transport decodes it (a 413 has no kind)."""
    return decode_response(msgspec.json.encode({"kind": kind, **response})).reply


def _fail(reply: asyncio.Future[Reply], kind: str, why: str) -> None:
    if not reply.done():
        reply.set_exception(NetworkError(f"{kind}: {why} (simulated)"))


def _subject(data: Any) -> str:
    task = getattr(data, "task", None)
    if task is not None:
        return f"{task.id} v{task.version}"
    return data.promise.id


def describe(kind: str, data: Any) -> str:
    """A request in a few words, for the trace."""
    if kind == "task.fence":
        return f"{data.id} v{data.version} {data.action.kind} {data.action.data.id}"
    if kind == "task.create":
        return f"{data.action.data.id}"
    if kind == "task.heartbeat":
        return ",".join(f"{t.id} v{t.version}" for t in data.tasks)
    if kind == "task.suspend":
        return f"{data.id} v{data.version} on " + ",".join(a.data.awaited for a in data.actions)
    text = str(getattr(data, "id", None) or getattr(data, "awaited", ""))
    version = getattr(data, "version", None)
    return f"{text} v{version}" if version is not None else text
