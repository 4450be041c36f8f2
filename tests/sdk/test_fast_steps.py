"""A finished local step is recorded with one request (``troth.sdk.recording``): the same
rows as the two standard requests, one ``task.fences`` per step, the standard requests
against a server without the extension, the slow path wherever a step may exist already,
and loud logs when that knowledge was wrong."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
import uvicorn

from tests.support.ports import free_port
from tests.support.servers import TrothServer
from tests.support.waiting import eventually
from troth import Troth
from troth.protocol.conventions import ATTEMPT_TAG, attempt_id
from troth.protocol.kinds import Kind
from troth.protocol.records import BRANCH, ORIGIN, PARENT, TARGET, PromiseState
from troth.protocol.requests import (
    Data,
    PromiseCreateRequest,
    PromiseSettleRequest,
    TaskFenceRequest,
    TaskFencesRequest,
)
from troth.protocol.responses import Reply
from troth.sdk import Context, Linear
from troth.sdk.codec import Codec
from troth.sdk.execution import RUN_TAG
from troth.sdk.known import Known
from troth.sdk.network import Network
from troth.sdk.recording import START_AFTER
from troth.sdk.replay import Call, digest
from troth.testing import VirtualTroth

pytestmark = pytest.mark.anyio


def double(n: int) -> int:
    return 2 * n


class Sent:
    """The requests a network sends, by kind, and the fenced actions by kind."""

    def __init__(self, network: Network) -> None:
        self.kinds: Counter[str] = Counter()
        self.batches: list[list[tuple[str, str]]] = []
        send = network.send

        async def counted(kind: Kind, data: Data) -> Reply:
            self.kinds[kind] += 1
            if isinstance(data, TaskFencesRequest):
                self.batches.append([(a.kind, a.data.id) for a in data.actions])
            elif isinstance(data, TaskFenceRequest):
                self.batches.append([(data.action.kind, data.action.data.id)])
            return await send(kind, data)

        network.send = counted  # type: ignore[method-assign]


def _slow_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every step may exist: each is created before it runs (the standard path)."""

    async def unknown(*args: Any) -> bool:
        return False

    monkeypatch.setattr(Known, "absent", unknown)


async def _rows(db: Path, batches: bool) -> tuple[Any, Any]:
    """One workflow of every kind of record (steps, a retried step, values, a sleep, a child
    workflow, concurrent steps) on virtual time; its result and the stored state after."""
    app = VirtualTroth(db=str(db), pid="p-1")
    failed: list[bool] = []

    def flaky(n: int) -> int:
        if not failed:
            failed.append(True)
            raise ConnectionError("down once")
        return n * 10

    @app.register
    async def child(ctx: Context, n: int) -> int:
        return await ctx.run(double, n) + 1

    @app.register
    async def flow(ctx: Context, steps: int) -> list[Any]:
        out: list[Any] = [await ctx.run(double, i) for i in range(steps)]
        out.append(await ctx.options(retry=Linear(step=1)).run(flaky, 3))
        out.append((await ctx.now()).year > 2000)
        await ctx.sleep(timedelta(seconds=30))
        out.append(await ctx.rpc(child, 4))
        out.extend([await f for f in [ctx.run(double, 7), ctx.run(double, 8)]])
        return out

    async with app:
        app.runtime.network.batches_fences = batches
        result = await app.options(timeout=timedelta(hours=1)).run("wf", flow, 6).result()
        await app.settle()  # the result's unblock delivered and acknowledged
        snapshot = await app._service.snapshot()
    # A step's promise is created when it starts on the standard path and when it ends on
    # the fast one: the same instant on virtual time, unless the clock moved meanwhile.
    promises = [msgspec.structs.replace(p, created_at=0) for p in snapshot.promises]
    return result, msgspec.structs.replace(snapshot, promises=promises)


async def test_the_fast_path_writes_the_rows_of_the_two_request_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    batched = await _rows(tmp_path / "batched.db", batches=True)
    standard = await _rows(tmp_path / "standard.db", batches=False)
    _slow_path(monkeypatch)
    slow = await _rows(tmp_path / "slow.db", batches=True)
    assert batched[0] == [0, 2, 4, 6, 8, 10, 30, True, 9, 14, 16]
    ids = [p.id for p in batched[1].promises]
    assert {"wf:0", "wf:6", attempt_id("wf:6", 1), "wf:9", "wf:9.0", "wf:10"} <= set(ids)
    assert batched == standard == slow


async def test_one_request_per_step_embedded(tmp_path: Path):
    app = VirtualTroth(db=str(tmp_path / "t.db"), pid="p-1")

    @app.register
    async def ten(ctx: Context) -> list[int]:
        return [await ctx.run(double, i) for i in range(10)]

    async with app:
        sent = Sent(app.runtime.network)
        assert await app.run("ten", ten).result() == [2 * i for i in range(10)]
    steps = [b for b in sent.batches if b[0][1].startswith("ten:")]
    assert steps == [
        [(Kind.PROMISE_CREATE, f"ten:{i}"), (Kind.PROMISE_SETTLE, f"ten:{i}")] for i in range(10)
    ]
    assert sent.kinds[Kind.TASK_FENCES] == len(sent.batches) and sent.kinds[Kind.TASK_FENCE] == 0


@pytest.mark.parametrize(
    "refusal",
    [
        Reply(400, f"Unknown operation: {Kind.TASK_FENCES}"),
        Reply(403, "Forbidden"),  # an unknown kind, to a server that authenticates a scoped token
    ],
)
async def test_a_server_without_the_extension_gets_the_standard_requests(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, refusal: Reply
):
    """What a server without troth's extension answers for an unknown kind: two
    ``task.fence`` per step from then on, the same result, and one INFO line."""
    app = VirtualTroth(db=str(tmp_path / "t.db"), pid="p-1")

    @app.register
    async def ten(ctx: Context) -> list[int]:
        return [await ctx.run(double, i) for i in range(10)]

    async with app:
        network = app.runtime.network
        send = network.send
        refused: list[Kind] = []

        async def without_extension(kind: Kind, data: Data) -> Reply:
            if kind == Kind.TASK_FENCES:
                refused.append(kind)
                return refusal
            return await send(kind, data)

        network.send = without_extension  # type: ignore[method-assign]
        sent = Sent(network)
        with caplog.at_level(logging.INFO, logger="troth.sdk.network"):
            assert await app.run("ten", ten).result() == [2 * i for i in range(10)]
    assert refused == [Kind.TASK_FENCES]  # asked once, never again
    assert sent.kinds[Kind.TASK_FENCE] >= 20
    said = [r for r in caplog.records if "does not know" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.INFO


def _step_tags(root: str, fn: Any, *args: Any) -> dict[str, str]:
    call = Call("run", fn.__name__, digest(args, {}))
    return {ORIGIN: root, PARENT: root, BRANCH: root, "resonate:scope": "local", **call.tags()}


async def test_a_step_recorded_behind_the_sdks_back_is_answered_from_its_record_loudly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    """The run knows (version 1) that ``wf:1`` and ``wf:2`` do not exist; a step plants
    them: ``wf:1`` settled (the recorded value wins, ERROR: it ran twice) and ``wf:2``
    pending from another run (this run's value is recorded, WARNING)."""
    app = VirtualTroth(db=str(tmp_path / "t.db"), pid="p-1")
    codec = Codec()

    async def plant() -> None:
        network = app.runtime.network
        far = app.runtime.clock.now() + 3_600_000
        foreign = {RUN_TAG: "dead/1"}
        one = PromiseCreateRequest(
            "wf:1",
            far,
            codec.encode({"func": "double"}),
            {**_step_tags("wf", double, 1), **foreign},
        )
        assert (await network.send(Kind.PROMISE_CREATE, one)).status == 200
        settle = PromiseSettleRequest("wf:1", "resolved", codec.encode(-1))
        assert (await network.send(Kind.PROMISE_SETTLE, settle)).status == 200
        two = PromiseCreateRequest(
            "wf:2",
            far,
            codec.encode({"func": "double"}),
            {**_step_tags("wf", double, 2), **foreign},
        )
        assert (await network.send(Kind.PROMISE_CREATE, two)).status == 200

    @app.register
    async def flow(ctx: Context) -> list[int]:
        await ctx.run(plant)
        return [await ctx.run(double, 1), await ctx.run(double, 2)]

    async with app:
        with caplog.at_level(logging.WARNING, logger="troth.sdk.recording"):
            assert await app.run("wf", flow).result() == [-1, 4]
        stored = await app.promises.get("wf:2")
    assert stored.state == PromiseState.RESOLVED and stored.tags[RUN_TAG] == "dead/1"
    said = {(r.levelno, r.getMessage().split()[1]) for r in caplog.records}
    assert said == {(logging.ERROR, "wf:1"), (logging.WARNING, "wf:2")}


@pytest.mark.parametrize("read_fails", [False, True])
async def test_a_resumed_run_finds_the_step_an_earlier_run_left_pending(
    tmp_path: Path, read_fails: bool
):
    """A later run (version 2, after a suspend) learns its branch before its first fast
    step: the step a dead run left pending takes the slow path, and the attempt that run
    was making is counted as interrupted; a new step after it is recorded with one request.
    If the read fails, nothing is guessed: every step is created before it runs."""
    app = VirtualTroth(db=str(tmp_path / "t.db"), pid="p-1")
    codec = Codec()
    ran: list[int] = []

    def counted(n: int) -> int:
        ran.append(n)
        return n

    @app.register
    async def flow(ctx: Context) -> list[int]:
        first = await ctx.run(counted, 0)
        await ctx.promise(id="wf:go")
        again = await ctx.options(retry=Linear(step=1)).run(counted, 1)
        return [first, again, await ctx.run(counted, 2)]

    async with app:
        handle = app.run("wf", flow)
        await app.settle()  # suspended on wf:go
        # What a run killed inside the step would have left: its start, pending.
        dead = PromiseCreateRequest(
            "wf:1",
            app.runtime.clock.now() + 3_600_000,
            codec.encode({"func": "counted"}),
            {**_step_tags("wf", counted, 1), RUN_TAG: "dead/1"},
        )
        network = app.runtime.network
        assert (await network.send(Kind.PROMISE_CREATE, dead)).status == 200
        if read_fails:
            send = network.send

            async def no_search(kind: Kind, data: Data) -> Reply:
                if kind == Kind.PROMISE_SEARCH:
                    return Reply(500, "Internal error: the disk is on fire")
                return await send(kind, data)

            network.send = no_search  # type: ignore[method-assign]
        sent = Sent(network)
        await app.promises.resolve("wf:go")
        assert await handle.result() == [0, 1, 2]
        interrupted = await app.promises.get(attempt_id("wf:1", 1))
    assert interrupted.state == PromiseState.REJECTED
    assert interrupted.tags[ATTEMPT_TAG] == "1"  # the dead run's attempt, counted
    assert ran == [0, 1, 2]
    assert sent.kinds[Kind.PROMISE_SEARCH] == 1  # the branch, read (or tried) once
    fresh = [b for b in sent.batches if b[0][1] == "wf:2"]
    create, settle = (Kind.PROMISE_CREATE, "wf:2"), (Kind.PROMISE_SETTLE, "wf:2")
    assert fresh == ([[create], [settle]] if read_fails else [[create, settle]])


@pytest.mark.slow
async def test_a_long_step_is_seen_pending_while_it_runs(tmp_path: Path):

    app = Troth(db=str(tmp_path / "t.db"))
    started = asyncio.Event()
    release = asyncio.Event()

    async def long() -> str:
        started.set()
        await release.wait()
        return "done"

    @app.register
    async def flow(ctx: Context) -> str:
        return await ctx.run(long)

    async with app:
        handle = app.run("wf", flow)
        await started.wait()
        await asyncio.sleep(START_AFTER * 3)
        pending = await app.promises.get("wf:0")
        release.set()
        assert await handle.result() == "done"
    assert pending.state == PromiseState.PENDING and RUN_TAG in pending.tags


# -- remote mode --------------------------------------------------------------------------


class WithoutExtension:
    """``troth serve`` behind a proxy that answers ``task.fences`` as a server without
    troth's extension answers any kind it does not know, and forwards everything else (the
    SSE stream included): the stand-in for the reference server, which cannot run here."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.kinds: Counter[str] = Counter()
        self._client: httpx.AsyncClient | None = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=None)
        headers = [(k, v) for k, v in scope["headers"] if k not in (b"host", b"content-length")]
        url = self.upstream + scope["path"]
        if scope["query_string"]:
            url += "?" + scope["query_string"].decode()
        if scope["method"] == "POST":
            envelope = json.loads(body)
            self.kinds[envelope["kind"]] += 1
            if envelope["kind"] == "task.fences":
                head = {"corrId": envelope["head"]["corrId"], "status": 400}
                answer = {"kind": "task.fences", "head": {**head, "version": "2026-04-01"}}
                answer["data"] = "Unknown operation: task.fences"
                await _respond(send, 200, json.dumps(answer).encode())
                return
            response = await self._client.post(url, content=body, headers=headers)
            await _respond(send, response.status_code, response.content)
            return
        async with self._client.stream(scope["method"], url, headers=headers) as response:
            kept = [(k, v) for k, v in response.headers.raw if k.lower() != b"content-length"]
            await send({"type": "http.response.start", "status": response.status_code,
                        "headers": kept})  # fmt: skip
            async for chunk in response.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})


async def _respond(send: Any, status: int, body: bytes) -> None:
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@contextlib.contextmanager
def proxied(upstream: str) -> Iterator[tuple[str, WithoutExtension]]:
    proxy = WithoutExtension(upstream)
    port = free_port()
    config = uvicorn.Config(proxy, host="127.0.0.1", port=port, log_level="warning",
                            lifespan="off", timeout_graceful_shutdown=1)  # fmt: skip
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    eventually(lambda: server.started, timeout=10)
    try:
        yield f"http://127.0.0.1:{port}", proxy
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def _tree(server: TrothServer, root: str) -> list[dict[str, Any]]:
    """The promises of ``root``'s tree as the server has them, without its id, instants
    and run- or process-specific tags (two runs at two times compare equal if they wrote
    the same)."""
    status, body = server.call("promise.search", {"tags": {ORIGIN: root}, "limit": 1000})
    assert status == 200
    out = []
    for p in body["promises"]:
        tags = {k: v for k, v in p["tags"].items() if k not in (RUN_TAG, TARGET)}
        tags = {k: v.replace(root, "ROOT") for k, v in tags.items()}
        kept = {k: v for k, v in p.items() if k not in ("createdAt", "settledAt", "timeoutAt")}
        out.append({**kept, "id": p["id"].replace(root, "ROOT"), "tags": tags})
    return sorted(out, key=lambda p: p["id"])


def _ten_steps(app: Troth) -> Any:
    @app.register
    async def ten(ctx: Context) -> list[int]:
        return [await ctx.run(double, i) for i in range(10)]

    return ten


@pytest.mark.slow
async def test_one_request_per_step_remote(server: TrothServer, uid: str):
    app = Troth(url=server.url, group=f"g{uid}")
    ten = _ten_steps(app)
    async with app:
        sent = Sent(app.runtime.network)
        assert await app.run(uid, ten).result() == [2 * i for i in range(10)]
    steps = [b for b in sent.batches if b[0][1].startswith(f"{uid}:")]
    assert steps == [
        [(Kind.PROMISE_CREATE, f"{uid}:{i}"), (Kind.PROMISE_SETTLE, f"{uid}:{i}")]
        for i in range(10)
    ]
    assert sent.kinds[Kind.TASK_FENCES] == len(sent.batches) and sent.kinds[Kind.TASK_FENCE] == 0


@pytest.mark.slow
async def test_a_server_without_the_extension_is_sent_standard_fences(
    server: TrothServer, uid: str, caplog: pytest.LogCaptureFixture
):
    """The same workflow through the proxy and straight to the server: the same result
    and the same rows; through the proxy, ``task.fences`` asked once and then two
    ``task.fence`` per step."""
    with proxied(server.url) as (url, proxy):
        behind = Troth(url=url, group=f"g{uid}b")
        with caplog.at_level(logging.INFO, logger="troth.sdk.network"):
            async with behind:
                result = await behind.run(f"{uid}b", _ten_steps(behind)).result()
    direct = Troth(url=server.url, group=f"g{uid}d")
    async with direct:
        assert await direct.run(f"{uid}d", _ten_steps(direct)).result() == result
    assert result == [2 * i for i in range(10)]
    assert proxy.kinds["task.fences"] == 1 and proxy.kinds["task.fence"] >= 20
    assert len([r for r in caplog.records if "does not know" in r.getMessage()]) == 1
    fenced = _tree(server, f"{uid}b")
    assert len(fenced) == 11 and fenced == _tree(server, f"{uid}d")
