"""``task.fences`` through both networks: a ``troth serve`` over HTTP (``HttpNetwork``, so
the envelope encodes and decodes the batch both ways) and embedded (``LocalNetwork``),
each answering ``(200, TaskFencesResult)`` with the same replies and the same state; and
the server's metrics and access log, which count a batch as one request of its kind and
one commit on either backend."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.server.test_metrics import moved, scrape
from tests.support.servers import BACKENDS, FAR, TrothServer, serve
from troth.protocol import to_builtins
from troth.protocol.kinds import Kind
from troth.protocol.records import PromiseState
from troth.protocol.requests import (
    CreateAction,
    FenceAction,
    PromiseCreateRequest,
    PromiseSettleRequest,
    TaskCreateRequest,
    TaskFencesRequest,
)
from troth.protocol.responses import Snapshot, TaskFenceResult, TaskFencesResult
from troth.sdk.clock import WallClock
from troth.sdk.http import HttpNetwork
from troth.sdk.local import LocalNetwork
from troth.sdk.network import Network
from troth.storage.sqlite import SqliteService

# Slow: a troth serve process.
pytestmark = pytest.mark.slow

TARGET = "poll://any@g"

BATCH = [
    FenceAction(Kind.PROMISE_CREATE, PromiseCreateRequest("t:0", FAR, tags={"troth:step": "s"})),
    FenceAction(Kind.PROMISE_SETTLE, PromiseSettleRequest("t:0", "resolved")),
    FenceAction(Kind.PROMISE_SETTLE, PromiseSettleRequest("t:7", "resolved")),  # inner 404
]


async def _batch(network: Network) -> tuple[Any, Any]:
    """A task claimed by ``p``, then BATCH at its version and at a stale one."""
    root = PromiseCreateRequest("t", FAR, tags={"resonate:target": TARGET})
    task = TaskCreateRequest("p", 60_000, CreateAction(Kind.PROMISE_CREATE, {}, root))
    status, claim = await network.send(Kind.TASK_CREATE, task)
    assert status == 200 and claim.task is not None
    version = claim.task.version
    fresh = await network.send(Kind.TASK_FENCES, TaskFencesRequest("t", version, BATCH))
    stale = await network.send(Kind.TASK_FENCES, TaskFencesRequest("t", version + 1, BATCH[:1]))
    return fresh, stale


def _judge(fresh: Any, stale: Any) -> None:
    status, body = fresh
    assert status == 200 and isinstance(body, TaskFencesResult)
    assert [f.status for f in body.fences] == [200, 200, 200]
    results: list[TaskFenceResult] = [f.body for f in body.fences]
    assert [r.kind for r in results] == ["promise.create", "promise.settle", "promise.settle"]
    assert all(r.preload == [] for r in results)
    assert results[0].inner.status == 200
    assert results[1].inner.body.promise.state == PromiseState.RESOLVED
    assert results[2].inner.status == 404
    status, body = stale
    assert status == 200
    assert [(f.status, f.body) for f in body.fences] == [(409, Kind.TASK_FENCE.message(409))]


async def _remote(url: str) -> tuple[Any, Any]:
    network = HttpNetwork(url, "g", "p", WallClock())
    try:
        return await _batch(network)
    finally:
        await network.stop()


async def _embedded(path: Path) -> tuple[tuple[Any, Any], Snapshot]:
    service = SqliteService(str(path), owner="embedded")
    try:
        return await _batch(LocalNetwork(service, WallClock(), "g", "p")), await service.snapshot()
    finally:
        await service.close()


def test_a_server_and_embedded_mode_answer_a_batch_alike(
    server: TrothServer, tmp_path: Path
) -> None:
    over_http = asyncio.run(_remote(server.url))
    embedded, embedded_snap = asyncio.run(_embedded(tmp_path / "embedded.db"))

    _judge(*over_http)
    _judge(*embedded)
    # Embedded leaves a refused inner reply's message to the envelope; the rest is equal.
    assert over_http[1] == embedded[1]
    first = [(f.status, f.body.kind, f.body.inner.status) for f in over_http[0].body.fences]
    assert first == [(f.status, f.body.kind, f.body.inner.status) for f in embedded[0].body.fences]
    promises = [p.id for p in embedded_snap.promises]
    assert promises == [p["id"] for p in server.snap()["promises"]] == ["t", "t:0"]
    assert to_builtins(embedded_snap.promises[1].value) == server.snap()["promises"][1]["value"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_batch_is_one_request_of_its_kind_and_one_commit(backend: str, tmp_path: Path) -> None:
    with serve(backend, tmp_path, "--access-log") as server:
        root = {"id": "t", "timeoutAt": FAR, "tags": {"resonate:target": TARGET}}
        action = {"kind": "promise.create", "head": {}, "data": root}
        server.ok("task.create", {"pid": "p", "ttl": 60_000, "action": action})
        actions = [
            {"kind": "promise.create", "head": {}, "data": {"id": "t:0", "timeoutAt": FAR}},
            {"kind": "promise.settle", "head": {}, "data": {"id": "t:0", "state": "resolved"}},
        ]
        before = scrape(server)
        answer = server.ok("task.fences", {"id": "t", "version": 1, "actions": actions})
        assert [f["head"]["status"] for f in answer["fences"]] == [200, 200]
        refused = {"id": "t", "version": 1, "actions": []}
        assert server.call("task.fences", refused) == (400, "actions must not be empty")
        after = scrape(server)
        assert server.terminate() == 0
        log = server.output()

    counted = "resonate_request_total"
    assert moved(before, after, counted, kind="task.fences", status="200") == 1
    assert moved(before, after, counted, kind="task.fences", status="400") == 1
    assert moved(before, after, counted, kind="task.fence", status="200") == 0
    name = "postgres" if backend == "postgres" else "sqlite"
    # Two fences, one transaction committing one request (the 400 never reached storage).
    assert moved(before, after, "troth_storage_commit_requests_count", backend=name) == 1
    assert moved(before, after, "troth_storage_commit_requests_sum", backend=name) == 1
    assert "POST / task.fences task_id=t promise_id=t:0 200" in log
