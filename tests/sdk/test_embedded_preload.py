"""No quadratic preload (issue 16): the SDK's fences go through ``task.fences``, whose
replies carry no preload, in embedded mode as against a server; a claim and a suspend
answered 300 still carry the branch, and a ``task.fence`` (what the official SDKs send) gets
the preload the reference server sends, whatever a client puts in the envelope. (The same
rows with and without the fast path: ``test_fast_steps``.)"""

from __future__ import annotations

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
    TaskFencesRequest,
    TaskReleaseRequest,
    TaskSuspendRequest,
)
from troth.sdk.clock import WallClock
from troth.sdk.local import LocalNetwork
from troth.sdk.network import action_head
from troth.storage.sqlite import SqliteService

pytestmark = pytest.mark.anyio

HEAD = {"corrId": "c", "version": "2026-04-01"}


def _create(id: str, tags: dict[str, str]) -> PromiseCreateRequest:
    return PromiseCreateRequest(id, FAR, tags=tags)


async def test_embedded_fences_carry_no_preload_but_claims_and_300s_do(tmp_path: Path):
    service = SqliteService(str(tmp_path / "t.db"), owner="embedded")
    network = LocalNetwork(service, WallClock(), "g", "p-1")
    root = _create("root", {BRANCH: "root", TARGET: "poll://any@g"})
    try:
        status, claim = await network.send(
            Kind.TASK_CREATE,
            TaskCreateRequest("p-1", 60_000, CreateAction("promise.create", HEAD, root)),
        )
        assert status == 200 and claim.preload == []

        def action(data: PromiseCreateRequest | PromiseSettleRequest, kind: Kind) -> FenceAction:
            return FenceAction(kind, data, action_head())

        step = {BRANCH: "root"}
        for id in ("root:0", "root:1"):
            both = [
                action(_create(id, step), Kind.PROMISE_CREATE),
                action(PromiseSettleRequest(id, "resolved"), Kind.PROMISE_SETTLE),
            ]
            status, body = await network.send(Kind.TASK_FENCES, TaskFencesRequest("root", 1, both))
            assert status == 200 and [f.body.inner.body.promise.id for f in body.fences] == [id, id]
            assert [f.body.preload for f in body.fences] == [[], []]  # nothing read back
        # A standard task.fence is answered as a server answers it: with the branch.
        settle = action(PromiseSettleRequest("root:1", "resolved"), Kind.PROMISE_SETTLE)
        status, again = await network.send(Kind.TASK_FENCE, TaskFenceRequest("root", 1, settle))
        assert sorted(p.id for p in again.preload) == ["root:0", "root:1"]

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
