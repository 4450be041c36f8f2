"""Deferred retries (``troth.engine.timeouts.defer_idle_retry``), on every backend, judged by
the oracle: a retry deferred while its execute waits in the outbox leaves the state the
machine has before that retry fires, and the delivery of the execute leaves the state the
machine reaches by firing it at the instant of delivery (less the delivered row, which
the machine's outbox never drops). From then on the retry runs on the machine's schedule.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine, Sequence
from typing import Any

from msgspec.structs import replace

from tests.support.storage import Backend, R, targeted
from troth.oracle import Oracle
from troth.protocol.envelope import Request
from troth.protocol.requests import TaskAcquireRequest
from troth.protocol.responses import Snapshot
from troth.storage.service import Delivery, Service
from troth.storage.sql.store import SqlStore

FAR = 10**12  # the promises' deadline: never reached here


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(coro)


class Both:
    """The service and the oracle, driven alike."""

    def __init__(self, service: Service) -> None:
        self.service = service
        self.oracle = Oracle(retry_timeout=R)

    async def handle(self, request: Request, now: int) -> None:
        reply = await self.service.handle(request, now)
        self.oracle.now = now
        assert reply == self.oracle.handle(request)

    async def same(self, delivered: Sequence[Delivery] = ()) -> Snapshot:
        """The service's snapshot equals the oracle's, less the rows ``delivered``."""
        gone = {(d.address, d.message) for d in delivered}
        machine = self.oracle.snapshot()
        machine = replace(
            machine, messages=[m for m in machine.messages if (m.address, m.message) not in gone]
        )
        ours = await self.service.snapshot()
        assert ours == machine
        return ours


def test_a_deferred_retry_fires_as_the_machine_says_once_its_execute_is_delivered(
    backend: Backend,
) -> None:
    async def scenario() -> None:
        both = Both(backend.service(retry_timeout=R))
        service = both.service
        await both.handle(targeted("p", FAR), 0)

        # Due at R, and again and again: each time deferred, nothing written.
        for now in (R, 2 * R, 3 * R):
            await service.fire_due(now, defer_idle=True)
            await both.same()  # the machine before its retry fires: deadline R, one execute
        assert await service.next_deadline(defer_idle=True) == FAR
        assert await service.next_deadline() == R

        # A worker takes the execute at t: the retry fires at t, before that delivery.
        t = 3 * R + 7
        delivered = await service.undelivered(10)
        assert [d.message.data.task.id for d in delivered] == ["p"]
        await service.ack(delivered, t)
        both.oracle.tick(t)
        snap = await both.same(delivered)
        assert [(e.id, e.type, e.timeout) for e in snap.task_timeouts] == [("p", 0, t + R)]
        assert await service.next_deadline(defer_idle=True) == t + R

        # Not acquired by t + R: the retry re-sends the execute, as Lean's does.
        await service.fire_due(t + R, defer_idle=True)
        both.oracle.tick(t + R)
        snap = await both.same()
        assert len(snap.messages) == 1 and snap.task_timeouts[0].timeout == t + 2 * R

        # That one waits undelivered too: deferred again.
        await service.fire_due(t + 2 * R, defer_idle=True)
        await both.same()
        assert await service.next_deadline(defer_idle=True) == FAR
        await service.close()

    run(scenario())


def test_a_sweep_that_does_not_defer_fires_a_deferred_retry_as_lean_does(
    backend: Backend,
) -> None:
    async def scenario() -> None:
        both = Both(backend.service(retry_timeout=R))
        service = both.service
        await both.handle(targeted("p", FAR), 0)
        await service.fire_due(R, defer_idle=True)
        # debug.tick, or embedded mode on a file a server deferred retries in.
        await service.fire_due(2 * R + 3)
        both.oracle.tick(2 * R + 3)
        await both.same()
        assert await service.next_deadline(defer_idle=True) == 3 * R + 3
        await service.close()

    run(scenario())


def test_a_task_acquired_while_its_retry_is_deferred_keeps_only_its_lease(
    backend: Backend,
) -> None:
    async def scenario() -> None:
        both = Both(backend.service(retry_timeout=R))
        service = both.service
        await both.handle(targeted("p", FAR), 0)
        await service.fire_due(R, defer_idle=True)
        delivered = await service.undelivered(10)
        acquire = TaskAcquireRequest("p", 0, "w", 60_000)
        await both.handle(Request("task.acquire", "c", acquire), 2 * R)
        await service.ack(delivered, 2 * R + 1)  # the delivery is acknowledged after
        snap = await both.same(delivered)
        assert [(e.type, e.timeout) for e in snap.task_timeouts] == [(1, 2 * R + 60_000)]
        await service.close()

    run(scenario())


def test_no_retry_stays_deferred_once_its_execute_is_delivered(backend: Backend) -> None:
    # A deferring sweep and the acknowledgements of the same rows, at once: on PostgreSQL
    # they run in concurrent transactions, which must not leave a retry deferred whose
    # message is gone (it would never fire again).
    async def scenario() -> None:
        service = backend.service(retry_timeout=R)
        ids = [f"p{i}" for i in range(200)]
        for id in ids:
            await service.handle(targeted(id, FAR), 0)
        delivered = await service.undelivered(len(ids))
        halves = [delivered[i::2] for i in range(2)]
        await asyncio.gather(
            service.fire_due(R, defer_idle=True),
            *(service.ack(half, R) for half in halves),
        )
        await service.fire_due(R, defer_idle=True)  # what the first sweep did not reach
        await service.close()

    run(scenario())

    def deferred_and_waiting(store: SqlStore[Any]) -> tuple[set[str], set[str]]:
        deferred = store.conn.execute("SELECT id FROM task_timeouts WHERE deferred = 1")
        keys = store.conn.execute("SELECT key FROM outbox WHERE kind = 'execute'")
        return {id for (id,) in deferred.fetchall()}, {
            json.loads(key)[1] for (key,) in keys.fetchall()
        }

    deferred, waiting = backend.transact(deferred_and_waiting)
    assert deferred <= waiting
