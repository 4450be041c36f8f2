"""``status()`` of an execution waiting in its queue is ``queued``, with its queue, key and
place in its key's line; once offered it is ``pending`` again (embedded, on a SQLite file)."""

from __future__ import annotations

from pathlib import Path

import pytest

from troth import ExecutionStatus, QueuedStatus, Troth
from troth.protocol.kinds import Kind
from troth.protocol.queues import QueueSetRequest, QueueSpec

pytestmark = pytest.mark.anyio


async def test_a_queued_execution_says_where_it_waits(tmp_path: Path) -> None:
    app = Troth(db=str(tmp_path / "app.db"))  # never started: no worker takes anything
    try:
        network = app.runtime.network
        await network.send(Kind.QUEUE_SET, QueueSetRequest(QueueSpec("llm", concurrency=1)))
        for id in ("a1", "a2", "a3"):
            tags = {"resonate:target": "poll://any@idle", "troth:queue": "llm",
                    "troth:queue-key": "acme"}  # fmt: skip
            await app.promises.create(id, timeout=3600, tags=tags)
        assert await app.executions.status("a1") == ExecutionStatus.PENDING  # offered
        third = await app.executions.status("a3")
        assert third == ExecutionStatus.QUEUED and third == "queued"
        assert isinstance(third, QueuedStatus)
        assert (third.queue, third.key, third.position) == ("llm", "acme", 2)
        await app.promises.resolve("a1")  # a1 settles: a2 is offered, a3 moves up
        assert await app.executions.status("a2") == ExecutionStatus.PENDING
        moved = await app.executions.status("a3")
        assert isinstance(moved, QueuedStatus) and moved.position == 1
    finally:
        await app.stop()
