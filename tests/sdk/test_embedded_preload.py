"""Embedded mode leaves the branch preload out of ``task.fence`` replies (issue 16): the
same rows as with it, the preload still on claims and on a suspend answered 300, and no way
to ask a server for the shortcut over HTTP."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.support.servers import FAR, TrothServer, serve
from troth.protocol.kinds import Kind
from troth.protocol.records import BRANCH, TARGET
from troth.protocol.requests import (
    CallbackAction,
    CreateAction,
    FenceAction,
    PromiseCreateRequest,
    PromiseRegisterCallbackRequest,
    PromiseSettleRequest,
    TaskAcquireRequest,
    TaskCreateRequest,
    TaskFenceRequest,
    TaskReleaseRequest,
    TaskSuspendRequest,
)
from troth.protocol.responses import Reply
from troth.sdk import Context, Linear
from troth.sdk.clock import WallClock
from troth.sdk.local import LocalNetwork
from troth.sdk.network import action_head
from troth.storage.sqlite import SqliteService
from troth.testing import VirtualTroth

pytestmark = pytest.mark.anyio

HEAD = {"corrId": "c", "version": "2026-04-01"}


def _flaky_once() -> Any:
    failed: list[bool] = []

    def flaky(n: int) -> int:
        if not failed:
            failed.append(True)
            raise ConnectionError("down once")
        return n * 10

    return flaky


async def _run_workflow(db: Path, fence_preload: bool) -> Any:
    """One workflow of every kind of record (steps, a retried step, a sleep, a child
    workflow, concurrent steps) on virtual time; the stored state afterwards."""
    app = VirtualTroth(db=str(db), pid="p-1")
    flaky = _flaky_once()

    def double(n: int) -> int:
        return 2 * n

    @app.register
    async def child(ctx: Context, n: int) -> int:
        return await ctx.run(double, n) + 1

    @app.register
    async def flow(ctx: Context, steps: int) -> list[int]:
        out = [await ctx.run(double, i) for i in range(steps)]
        out.append(await ctx.options(retry=Linear(step=1)).run(flaky, 3))
        await ctx.sleep(timedelta(seconds=30))
        out.append(await ctx.rpc(child, 4))
        out.extend([await f for f in [ctx.run(double, 7), ctx.run(double, 8)]])
        return out

    async with app:
        network = app.runtime.network
        assert isinstance(network, LocalNetwork) and network.fence_preload is False
        network.fence_preload = fence_preload  # the instance only
        result = await app.options(timeout=timedelta(hours=1)).run("wf", flow, 6).result()
        await app.settle()  # the result's unblock delivered and acknowledged
        snapshot = await app._service.snapshot()
    return result, snapshot


async def test_the_fast_path_leaves_exactly_the_rows_of_the_normal_path(tmp_path: Path):
    fast = await _run_workflow(tmp_path / "fast.db", fence_preload=False)
    normal = await _run_workflow(tmp_path / "normal.db", fence_preload=True)
    assert fast[0] == [0, 2, 4, 6, 8, 10, 30, 9, 14, 16]
    assert len(fast[1].promises) > 15  # the comparison compares something
    assert fast == normal


def _create(id: str, tags: dict[str, str]) -> PromiseCreateRequest:
    return PromiseCreateRequest(id, FAR, tags=tags)


async def test_embedded_fence_replies_carry_no_preload_but_claims_and_300s_do(tmp_path: Path):
    service = SqliteService(str(tmp_path / "t.db"), owner="embedded")
    network = LocalNetwork(service, WallClock(), "g", "p-1")
    root = _create("root", {BRANCH: "root", TARGET: "poll://any@g"})
    try:
        status, claim = await network.send(
            Kind.TASK_CREATE,
            TaskCreateRequest("p-1", 60_000, CreateAction("promise.create", HEAD, root)),
        )
        assert status == 200 and claim.preload == []

        async def fence(data: PromiseCreateRequest | PromiseSettleRequest, kind: Kind) -> Reply:
            request = TaskFenceRequest("root", 1, FenceAction(kind, data, action_head()))
            return await network.send(Kind.TASK_FENCE, request)

        step = {BRANCH: "root"}
        for id in ("root:0", "root:1"):
            assert (await fence(_create(id, step), Kind.PROMISE_CREATE)).status == 200
            settled = await fence(PromiseSettleRequest(id, "resolved"), Kind.PROMISE_SETTLE)
            assert settled.status == 200 and settled.body.inner.body.promise.id == id
            assert settled.body.preload == []  # the fast path: nothing read back
        # The same request with the preload asked for: the branch is there to be sent.
        network.fence_preload = True
        again = await fence(PromiseSettleRequest("root:1", "resolved"), Kind.PROMISE_SETTLE)
        assert sorted(p.id for p in again.body.preload) == ["root:0", "root:1"]
        network.fence_preload = False

        # A suspend answered 300 still carries the branch: the rerun replays from it.
        callback = PromiseRegisterCallbackRequest(awaited="root:0", awaiter="root")
        action = CallbackAction(Kind.PROMISE_REGISTER_CALLBACK, action_head(), callback)
        suspend = TaskSuspendRequest("root", 1, [action])
        status, body = await network.send(Kind.TASK_SUSPEND, suspend)
        assert status == 300 and sorted(p.id for p in body.preload) == ["root:0", "root:1"]

        # So does a claim by a worker that resumes the task.
        assert (await network.send(Kind.TASK_RELEASE, TaskReleaseRequest("root", 1))).status == 200
        status, claim = await network.send(
            Kind.TASK_ACQUIRE, TaskAcquireRequest("root", 1, "p-2", 60_000)
        )
        assert status == 200 and sorted(p.id for p in claim.preload) == ["root:0", "root:1"]
    finally:
        await service.close()


def _fence_create(server: TrothServer, id: str, **extra: Any) -> tuple[int, Any]:
    action = {
        "kind": "promise.create",
        "head": HEAD,
        "data": {"id": id, "timeoutAt": FAR, "tags": {BRANCH: "root"}},
    }
    data = {"id": "root", "version": 1, "action": action, **extra.pop("data", {})}
    return server.call("task.fence", data, **extra)


@pytest.mark.slow
def test_the_shortcut_cannot_be_asked_for_over_http(tmp_path: Path):
    """Whatever a client puts in the envelope, a server's fence reply carries the preload."""
    with serve("sqlite", tmp_path) as server:
        create = {"id": "root", "timeoutAt": FAR, "tags": {BRANCH: "root", TARGET: "poll://any@g"}}
        server.ok("task.create", {"pid": "w", "ttl": 60_000, "action": {
            "kind": "promise.create", "head": HEAD, "data": create}})  # fmt: skip
        for id in ("root:0", "root:1"):
            action = {
                "kind": "promise.settle",
                "head": HEAD,
                "data": {"id": id, "state": "resolved"},
            }
            assert _fence_create(server, id)[0] == 200
            server.ok("task.fence", {"id": "root", "version": 1, "action": action})
        for asked in [
            {},
            {"fence_preload": False},
            {"fencePreload": False},
            {"preload": False},
            {"data": {"fence_preload": False}},
            {"data": {"fencePreload": False}},
            {"data": {"preload": False}},
        ]:
            status, body = _fence_create(server, "root:2", **asked)
            if status == 200:
                assert sorted(p["id"] for p in body["preload"]) == ["root:0", "root:1"], asked
            else:
                assert status == 400, (asked, body)
