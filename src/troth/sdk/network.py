"""The transport seam: everything above it is the same in embedded and remote mode.

A ``Network`` sends one typed request and answers a ``Reply`` whose body is the typed
response of ``troth.protocol`` (or, for an error status, the server's message), and it
pushes incoming messages (``Execute``, ``Unblock``) to one callback. ``HttpNetwork`` speaks
HTTP and SSE to any conformant server; ``LocalNetwork`` runs the engine in-process.
"""

from __future__ import annotations

import itertools
import os
import socket
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple, Protocol

import msgspec

from troth.protocol.envelope import VERSION, error_text
from troth.protocol.messages import ExecuteData, UnblockData
from troth.protocol.records import PromiseRecord
from troth.protocol.requests import Data
from troth.protocol.responses import (
    PromiseResponse,
    Reply,
    ScheduleResponse,
    TaskClaimResponse,
    TaskFenceResult,
    TaskGetResponse,
    TaskSuspendedResponse,
)
from troth.sdk.clock import Clock


class Execute(NamedTuple):
    """Run (or resume) the task ``task_id``, presenting ``version`` to acquire it."""

    task_id: str
    version: int


class Unblock(NamedTuple):
    """A promise this process listens to has settled."""

    promise: PromiseRecord


Incoming = Execute | Unblock
OnMessage = Callable[[Incoming], None]
OnConnect = Callable[[], Awaitable[None]]


class FenceReply(NamedTuple):
    """The body of a 200 ``task.fence``: the inner operation's status and promise, and the
    task's branch preload computed after it."""

    status: int
    promise: PromiseRecord | None
    preload: list[PromiseRecord]


class Network(Protocol):
    pid: str
    group: str
    clock: Clock

    async def send(self, kind: str, data: Data) -> Reply:
        """One request; raises ``NetworkError`` only when no answer could be had."""
        ...

    async def start(self, on_message: OnMessage, on_connect: OnConnect) -> None:
        """Begin receiving messages for this process; ``on_connect`` runs on every
        (re)connection so that listeners lost with a dropped stream can be renewed."""
        ...

    async def stop(self) -> None: ...


def anycast(group: str, pid: str | None = None) -> str:
    """Any worker of ``group``, preferring ``pid`` when it is connected."""
    return f"poll://any@{group}/{pid}" if pid else f"poll://any@{group}"


def unicast(group: str, pid: str) -> str:
    return f"poll://uni@{group}/{pid}"


def target_address(target: str) -> str:
    """A group name as its anycast address; a full address (with a scheme) unchanged."""
    return target if "://" in target else anycast(target)


def new_pid() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{os.urandom(3).hex()}"


_corr_ids = itertools.count(1)
_corr_prefix = f"troth-{os.urandom(4).hex()}-"


def corr_id() -> str:
    return f"{_corr_prefix}{next(_corr_ids)}"


def action_head() -> dict[str, str]:
    """The head of a request nested as an action (in task.create, task.fence, task.suspend)."""
    return {"corrId": corr_id(), "version": VERSION}


def error_message(kind: str, status: int, body: Any) -> str:
    return error_text(kind, status, body)


# -- decoding response bodies (remote) ------------------------------------------------------

_BODY_TYPES: dict[str, type] = {
    "promise.get": PromiseResponse,
    "promise.create": PromiseResponse,
    "promise.settle": PromiseResponse,
    "promise.register_callback": PromiseResponse,
    "promise.register_listener": PromiseResponse,
    "task.create": TaskClaimResponse,
    "task.acquire": TaskClaimResponse,
    "task.fulfill": PromiseResponse,
    "task.get": TaskGetResponse,
    "schedule.get": ScheduleResponse,
    "schedule.create": ScheduleResponse,
}


class _InnerHead(msgspec.Struct, rename="camel"):
    status: int


class _InnerEnvelope(msgspec.Struct):
    head: _InnerHead
    data: msgspec.Raw = msgspec.Raw(b"null")


class _FenceBody(msgspec.Struct):
    action: _InnerEnvelope
    preload: list[PromiseRecord] = []


def decode_body(kind: str, status: int, raw: bytes) -> Any:
    """The typed body of a 200/300 response as ``troth.protocol`` models it."""
    if kind == "task.fence":
        fence = msgspec.json.decode(raw, type=_FenceBody)
        inner = fence.action
        promise = None
        if inner.head.status == 200:
            promise = msgspec.json.decode(inner.data, type=PromiseResponse).promise
        return FenceReply(inner.head.status, promise, fence.preload)
    if kind == "task.suspend" and status == 300:
        return msgspec.json.decode(raw, type=TaskSuspendedResponse)
    body_type = _BODY_TYPES.get(kind)
    if body_type is None:
        return msgspec.json.decode(raw)
    return msgspec.json.decode(raw, type=body_type)


def fence_reply(body: TaskFenceResult) -> FenceReply:
    """An in-process fence result in the shape ``decode_body`` gives a remote one."""
    inner_status, inner_body = body.inner
    promise = inner_body.promise if isinstance(inner_body, PromiseResponse) else None
    return FenceReply(inner_status, promise, body.preload)


# -- decoding messages ----------------------------------------------------------------------


class _RawMessage(msgspec.Struct):
    kind: str
    data: msgspec.Raw


def decode_message(raw: bytes | str) -> Incoming | None:
    """An SSE ``data:`` payload as a message; None for kinds this SDK does not handle."""
    message = msgspec.json.decode(raw, type=_RawMessage)
    if message.kind == "execute":
        task = msgspec.json.decode(message.data, type=ExecuteData).task
        return Execute(task.id, task.version)
    if message.kind == "unblock":
        return Unblock(msgspec.json.decode(message.data, type=UnblockData).promise)
    return None
