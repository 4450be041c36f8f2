"""``task.fences`` on every backend: the sequence of its fences, in one transaction.

A batch must leave exactly what its fences sent one by one would leave (judged against the
oracle answering them as standard ``task.fence`` requests), a fence the engine refuses or
answers with an error must not undo the ones before it, and a batch that fails as a whole
(here a CHECK constraint, reached by handing the service a fence the doors would refuse)
must leave nothing of any of its fences.
"""

from __future__ import annotations

import asyncio
from typing import Any

from tests.support.storage import TARGET, Backend, create
from troth.oracle import Oracle
from troth.protocol import Request, to_builtins
from troth.protocol.kinds import Kind
from troth.protocol.records import Value
from troth.protocol.requests import (
    CreateAction,
    FenceAction,
    PromiseCreateRequest,
    PromiseSettleRequest,
    TaskCreateRequest,
    TaskFenceRequest,
    TaskFencesRequest,
)
from troth.protocol.responses import Reply, TaskFenceResult, TaskFencesResult
from troth.storage.sqlite import SqliteService

NOW = 1_000
FAR = 1_000_000


def _task(id: str) -> Request:
    created = PromiseCreateRequest(id, FAR, Value(), {"resonate:target": TARGET})
    action = CreateAction(Kind.PROMISE_CREATE, {}, created)
    return Request(Kind.TASK_CREATE, "c", TaskCreateRequest("w", 60_000, action))


def _create(id: str, timeout_at: int = FAR) -> FenceAction:
    return FenceAction(Kind.PROMISE_CREATE, PromiseCreateRequest(id, timeout_at, Value(), {}))


def _settle(id: str) -> FenceAction:
    return FenceAction(Kind.PROMISE_SETTLE, PromiseSettleRequest(id, "resolved", Value()))


def _fences(actions: list[FenceAction], version: int = 1) -> Request:
    return Request(Kind.TASK_FENCES, "c", TaskFencesRequest("t", version, actions))


# The second settle names a promise nobody created (its fence answers 200 with an inner
# 404); the create after it must happen anyway, as it would on its own.
ACTIONS = [_create("t:1"), _settle("t:1"), _settle("t:9"), _create("t:2"), _create("t:1")]


def _oracle_one_by_one(actions: list[FenceAction]) -> tuple[list[Reply], Any]:
    """The oracle's answers to the standard fences, preloads left out, and its snapshot."""
    oracle = Oracle()
    oracle.now = NOW
    oracle.handle(_task("t"))
    replies = []
    for action in actions:
        reply = oracle.handle(Request(Kind.TASK_FENCE, "c", TaskFenceRequest("t", 1, action)))
        if isinstance(reply.body, TaskFenceResult):
            reply = Reply(reply.status, reply.body._replace(preload=[]))
        replies.append(reply)
    return replies, oracle.snapshot()


def test_a_batch_answers_and_leaves_what_its_fences_one_by_one_would(backend: Backend) -> None:
    async def scenario() -> None:
        service = backend.service()
        try:
            assert (await service.handle(_task("t"), NOW)).status == 200
            reply = await service.handle(_fences(ACTIONS), NOW)
            snapshot = await service.snapshot()
        finally:
            await service.close()
        assert reply.status == 200 and isinstance(reply.body, TaskFencesResult)
        expected, oracle_snapshot = _oracle_one_by_one(ACTIONS)
        inner = [fence.body.inner.status for fence in reply.body.fences]
        assert inner == [200, 200, 404, 200, 200]  # the 404 did not stop the create after it
        assert to_builtins(reply.body.fences) == to_builtins(expected)
        assert to_builtins(snapshot) == to_builtins(oracle_snapshot)
        assert {p.id for p in snapshot.promises} == {"t", "t:1", "t:2"}

    asyncio.run(scenario())


def test_a_batch_at_a_stale_version_answers_each_fence_409_and_writes_nothing(
    backend: Backend,
) -> None:
    async def scenario() -> None:
        service = backend.service()
        try:
            await service.handle(_task("t"), NOW)
            before = await service.snapshot()
            reply = await service.handle(_fences(ACTIONS[:2], version=7), NOW)
            assert reply.status == 200
            assert reply.body.fences == [Reply(409, Kind.TASK_FENCE.message(409))] * 2
            assert await service.snapshot() == before
        finally:
            await service.close()

    asyncio.run(scenario())


def test_a_batch_that_fails_midway_leaves_none_of_its_fences(backend: Backend) -> None:
    # A timeoutAt below 0 breaks ``CHECK (timeout_at >= 0)`` after the first fence wrote.
    broken = _fences([_create("t:1"), _settle("t:1"), _create("t:2", timeout_at=-1)])

    async def scenario() -> None:
        service = backend.service()
        try:
            await service.handle(_task("t"), NOW)
            before = await service.snapshot()
            outcomes = await backend.together(service, [create("a"), broken, create("b")])
            assert isinstance(outcomes[1], backend.check_violation)
            assert [o.status for o in (outcomes[0], outcomes[2])] == [200, 200]
            after = await service.snapshot()
            # Everything else of the group commit is there; nothing of the batch is.
            assert {p.id for p in after.promises} == {p.id for p in before.promises} | {"a", "b"}
            assert [p for p in after.promises if p.id not in ("a", "b")] == before.promises
            assert after.tasks == before.tasks
        finally:
            await service.close()

    asyncio.run(scenario())


def test_a_batch_is_one_commit_on_sqlite(tmp_path: Any) -> None:
    async def scenario() -> None:
        service = SqliteService(str(tmp_path / "t.db"))
        try:
            await service.handle(_task("t"), NOW)
            commits = service.commits
            reply = await service.handle(_fences(ACTIONS), NOW)
            assert len(reply.body.fences) == len(ACTIONS)
            assert service.commits == commits + 1
        finally:
            await service.close()

    asyncio.run(scenario())
