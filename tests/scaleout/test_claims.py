"""``Service.claim``: how servers sharing an outbox split its rows between them."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from tests.support.storage import targeted
from troth.storage.postgres import PostgresService
from troth.storage.service import Delivery
from troth.storage.sqlite import SqliteService

R = 5000


async def enqueued(service: PostgresService, n: int) -> list[Delivery]:
    for i in range(n):
        await service.handle(targeted(f"p{i}"), 0)
    rows = await service.undelivered(n + 1)
    assert len(rows) == n
    return rows


def seqs(deliveries: list[Delivery]) -> list[int]:
    return [d.seq for d in deliveries]


def test_a_claimed_row_is_refused_to_others_until_given_up(db_url: str) -> None:
    async def scenario() -> None:
        a, b = (
            PostgresService(db_url, retry_timeout=R, pool_size=2),
            PostgresService(db_url, retry_timeout=R, pool_size=2),
        )
        rows = await enqueued(a, 3)
        assert seqs(await a.claim(rows[:2], "a", 60_000)) == seqs(rows[:2])
        assert seqs(await b.claim(rows, "b", 60_000)) == seqs(rows[2:])
        assert seqs(await a.claim(rows, "a", 60_000)) == seqs(rows[:2])  # renewed, not taken
        assert await a.claim(rows[:1], "a", 0) == rows[:1]  # given up
        assert seqs(await b.claim(rows, "b", 60_000)) == [rows[0].seq, rows[2].seq]
        await a.close()
        await b.close()

    asyncio.run(scenario())


def test_a_claim_lapses_so_a_dead_servers_rows_are_taken_over(db_url: str) -> None:
    async def scenario() -> None:
        service = PostgresService(db_url, retry_timeout=R, pool_size=2)
        rows = await enqueued(service, 2)
        assert await service.claim(rows, "dead", 300) == rows
        assert await service.claim(rows, "alive", 60_000) == []
        time.sleep(0.4)
        assert await service.claim(rows, "alive", 60_000) == rows
        await service.close()

    asyncio.run(scenario())


def test_a_superseding_message_is_anybodys_to_deliver(db_url: str) -> None:
    async def scenario() -> None:
        service = PostgresService(db_url, retry_timeout=R, pool_size=2)
        [old] = await enqueued(service, 1)
        assert await service.claim([old], "a", 60_000) == [old]
        assert await service.fire_due(R) == 1  # the task's retry re-sends its execute
        [new] = await service.undelivered(10)
        assert new.seq != old.seq
        assert await service.claim([new], "b", 60_000) == [new]
        await service.close()

    asyncio.run(scenario())


def test_rows_claimed_by_servers_at_once_go_to_exactly_one_of_them(db_url: str) -> None:
    async def scenario() -> None:
        services = [PostgresService(db_url, retry_timeout=R, pool_size=4) for _ in range(3)]
        rows = await enqueued(services[0], 200)
        # Each server claims every row, in small overlapping batches, all at the same time.
        batches = [rows[i : i + 20] for i in range(0, len(rows), 10)]
        attempts = [(f"s{n}", s, batch) for n, s in enumerate(services) for batch in batches]
        claims = await asyncio.gather(*(s.claim(b, holder, 60_000) for holder, s, b in attempts))
        # A server renews its own claims, so only the holders count: one per row.
        holders: dict[int, set[str]] = {}
        for (holder, _, _), claim in zip(attempts, claims, strict=True):
            for delivery in claim:
                holders.setdefault(delivery.seq, set()).add(holder)
        assert sorted(holders) == seqs(rows)
        assert all(len(h) == 1 for h in holders.values()), holders
        for service in services:
            await service.close()

    asyncio.run(scenario())


def test_one_server_owns_a_sqlite_outbox_and_claims_everything(tmp_path: Path) -> None:
    async def scenario() -> None:
        service = SqliteService(str(tmp_path / "t.db"), retry_timeout=R)
        await service.handle(targeted("p"), 0)
        rows = await service.undelivered(10)
        assert await service.claim(rows, "a", 60_000) == rows
        assert await service.claim(rows, "b", 60_000) == rows
        await service.close()

    asyncio.run(scenario())
