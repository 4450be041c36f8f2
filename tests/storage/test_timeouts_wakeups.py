"""The timeouts loop over a SQLite service, as embedded mode wires it: a commit wakes the loop
(a deadline read: a thread hop and a query) only when it armed a deadline earlier than the
one the loop sleeps towards, and such a deadline still fires on time.

Before, every request woke the loop, which read the next deadline again (coalesced to one
read per 5 ms): at 16 callers about 200 reads a second, 5-8 % of an embedded app's CPU.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

from tests.support.storage import timer
from troth.storage.sqlite import SqliteService
from troth.storage.timeouts_loop import TimeoutsLoop

HOUR = 3_600_000


def now() -> int:
    return int(time.time() * 1000)


class CountedTimers:
    """The service's own timers, each deadline read counted."""

    def __init__(self, service: SqliteService) -> None:
        self.service = service
        self.reads = 0

    async def fire_due(self, now: int) -> int:
        return await self.service.fire_due(now)

    async def next_deadline(self) -> int | None:
        self.reads += 1
        return await self.service.next_deadline()


async def until(check: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


def test_only_a_commit_arming_an_earlier_deadline_wakes_the_loop(tmp_path: Path) -> None:
    async def scenario() -> None:
        service = SqliteService(str(tmp_path / "t.db"))
        timers = CountedTimers(service)
        loop = TimeoutsLoop(timers, now=now, coalesce_ms=0)
        service.on_armed = loop.poke
        running = asyncio.create_task(loop.run())
        try:
            await until(lambda: timers.reads == 1)  # the first pass: no deadline yet
            first = now() + HOUR
            assert (await service.handle(timer("first", first), now())).status == 200
            await until(lambda: timers.reads == 2)  # earlier than none: the loop looks
            for i in range(20):
                reply = await service.handle(timer(f"later-{i}", first + 1 + i), now())
                assert reply.status == 200
            await asyncio.sleep(0.1)
            assert timers.reads == 2  # twenty later deadlines: not one look

            soon = now() + 200
            assert (await service.handle(timer("soon", soon), now())).status == 200
            await until(lambda: timers.reads > 2)  # earlier: it looks at once...
            # ...and fires it on time, then sleeps towards the hour again.
            await until(lambda: timers.reads >= 5, timeout=3)
            assert await service.next_deadline() == first
            assert now() >= soon
        finally:
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)
            await service.close()

    asyncio.run(scenario())


def test_the_deadline_armed_is_the_earliest_of_the_commit(tmp_path: Path) -> None:
    async def scenario() -> None:
        service = SqliteService(str(tmp_path / "t.db"))
        heard: list[int] = []
        service.on_armed = heard.append
        # One batch: three creates queued in the same loop turn commit together.
        replies = await asyncio.gather(
            *(service.handle(timer(id, at), 0) for id, at in [("a", 300), ("b", 100), ("c", 200)])
        )
        assert [reply.status for reply in replies] == [200, 200, 200]
        assert heard == [100] and service.commits == 1
        await service.handle(timer("a", 300), 0)  # a replay of a create arms nothing
        assert heard == [100]
        await service.close()

    asyncio.run(scenario())
