"""SQLite's single writer: group commit, and reads that never wait behind a write."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.support.storage import create, get, hold_writer, submitted, targeted
from troth.storage.sqlite import SqliteService


def test_concurrent_requests_commit_together(tmp_path: Path) -> None:
    async def scenario() -> None:
        service = SqliteService(str(tmp_path / "t.db"))
        before = service.commits
        release = await hold_writer(service)
        tasks = await submitted([targeted(f"p{i}") for i in range(100)], service)
        release.set()
        replies = await asyncio.gather(*tasks)
        assert {reply.status for reply in replies} == {200}
        # One commit for the blocking job, one for all hundred requests.
        assert service.commits == before + 2
        snap = await service.snapshot()
        assert len(snap.promises) == len(snap.tasks) == len(snap.messages) == 100
        await service.close()

    asyncio.run(scenario())


def test_many_concurrent_writers_all_commit_and_share_commits(tmp_path: Path) -> None:
    async def scenario() -> None:
        service = SqliteService(str(tmp_path / "t.db"))
        before = service.commits

        async def writer(k: int) -> None:
            for i in range(40):
                reply = await service.handle(targeted(f"w{k}.{i}"), 0)
                assert reply.status == 200

        await asyncio.gather(*(writer(k) for k in range(16)))
        assert service.commits - before < 16 * 40
        snap = await service.snapshot()
        assert len(snap.promises) == len(snap.tasks) == 16 * 40
        await service.close()

    asyncio.run(scenario())


def test_reads_do_not_wait_behind_writes(tmp_path: Path) -> None:
    async def scenario() -> None:
        service = SqliteService(str(tmp_path / "t.db"))
        await service.handle(create("p"), 0)
        release = await hold_writer(service)
        try:
            reply = await asyncio.wait_for(service.handle(get("p"), 0), timeout=5)
            assert reply.status == 200
            assert await asyncio.wait_for(service.snapshot(), timeout=5)
        finally:
            release.set()
        await service.close()

    asyncio.run(scenario())
