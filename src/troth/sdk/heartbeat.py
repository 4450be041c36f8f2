"""Heartbeats: one ``task.heartbeat`` every TTL/2 renews the lease of every task held.

Against a server the heartbeat runs in a thread of its own, with its own event loop and
its own connections (``HttpNetwork.twin``). A step that blocks the event loop (``time.sleep``
inside an ``async def``, a long ``inline=True`` step) then holds up its process but not its
leases: the lease does not lapse under it, the task is not run again elsewhere meanwhile,
and the block is reported as a stall (``troth.sdk.stalls``) instead of becoming a lease
loss and a re-run. Only code that keeps the GIL (a C extension that does not release it)
or a frozen process stops this thread too; then the lease lapses, and the run that takes
the task over counts the lost attempt (``troth.sdk.attempts``).

In embedded mode, and on virtual time, the heartbeat runs on the event loop: the engine
that would let the lease lapse runs on that loop too, and virtual time moves only there.

Either way a heartbeat is acknowledged or not as a whole, and only an acknowledged one
renews (``Leases.renewed``). The reference server refuses a heartbeat whose tasks span
origins (400); from the first refusal on, one is sent per origin.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from troth.protocol.ids import origin
from troth.protocol.kinds import Kind
from troth.protocol.records import TaskRef
from troth.protocol.requests import TaskHeartbeatRequest
from troth.sdk.clock import Clock, WallClock
from troth.sdk.leases import HeldTask, Leases
from troth.sdk.network import Network

log = logging.getLogger(__name__)

Send = Callable[[Kind, Any], Awaitable[tuple[int, Any]]]


class Heartbeat(Protocol):
    def start(self) -> None: ...

    async def stop(self) -> None: ...


class Beats:
    """What one heartbeat sends, and what its answer renews."""

    def __init__(self, leases: Leases, clock: Clock, pid: str) -> None:
        self._leases = leases
        self._clock = clock
        self._pid = pid
        self._per_origin = False

    async def beat(self, send: Send) -> None:
        """One heartbeat for every held task (one per origin if the server insists)."""
        tasks = self._leases.held()
        if not tasks:
            return
        if not self._per_origin:
            if await self._once(send, tasks) != 400:
                return
            self._per_origin = True
        by_origin: dict[str, list[HeldTask]] = {}
        for task in tasks:
            by_origin.setdefault(origin(task.id), []).append(task)
        for held in by_origin.values():
            await self._once(send, held)

    async def _once(self, send: Send, tasks: list[HeldTask]) -> int:
        sent = self._clock.now()
        refs = [TaskRef(task.id, task.version) for task in tasks]
        status, _ = await send(Kind.TASK_HEARTBEAT, TaskHeartbeatRequest(self._pid, refs))
        if status == 200:
            self._leases.renewed(tasks, sent)
        return status


class LoopHeartbeat:
    """Beats on the event loop, every TTL/2 while a task is held."""

    def __init__(self, beats: Beats, leases: Leases, clock: Clock, send: Send) -> None:
        self._beats = beats
        self._leases = leases
        self._clock = clock
        self._send = send
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="troth-heartbeat")

    async def _run(self) -> None:
        while True:
            await self._leases.any_held()
            await self._clock.sleep(self._leases.ttl_ms / 2000)
            try:
                await self._beats.beat(self._send)
            except Exception as e:
                log.warning("heartbeat failed: %s", e)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None


class ThreadHeartbeat:
    """Beats from a thread of its own, every TTL/2, over connections of its own: nothing
    the event loop's code does can hold it up (short of keeping the GIL)."""

    def __init__(self, beats: Beats, leases: Leases, network: Network) -> None:
        self._beats = beats
        self._leases = leases
        self._network = network  # used by this thread only
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._main, name="troth-heartbeat", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _main(self) -> None:
        loop = asyncio.new_event_loop()
        try:
            while not self._stopping.wait(self._leases.ttl_ms / 2000):
                try:
                    loop.run_until_complete(self._beats.beat(self._network.send))
                except Exception as e:
                    log.warning("heartbeat failed: %s", e)
        finally:
            loop.run_until_complete(self._network.stop())
            loop.close()

    async def stop(self) -> None:
        self._stopping.set()
        # A heartbeat in flight may be retrying against a server that is gone: the thread
        # (a daemon) ends once it gives up, and beats for no task meanwhile.
        await asyncio.to_thread(self._thread.join, 1)


def heartbeat_for(leases: Leases, network: Network, clock: Clock) -> Heartbeat:
    """The heartbeat of a worker: from a thread of its own against a server on the wall
    clock, else on the loop (see the module docstring)."""
    beats = Beats(leases, clock, network.pid)
    twin = network.twin() if isinstance(clock, WallClock) else None
    if twin is not None:
        return ThreadHeartbeat(beats, leases, twin)
    return LoopHeartbeat(beats, leases, clock, network.send)
