"""The transport seam: everything above it is the same in embedded and remote mode.

A ``Network`` sends one typed request and answers a ``Reply`` whose body is the typed
response of its kind (``troth.protocol.Kind.responses``; for an error status, the server's
message), and it pushes incoming messages (``troth.protocol.Message``: ``Execute``,
``Unblock``) to one callback. ``HttpNetwork`` speaks HTTP and SSE to any conformant server;
``LocalNetwork`` runs the engine in-process.

``Network.call`` is how the SDK sends a request whose every unexpected status is the
caller's error: the reply if its status is one the caller handles, else ``ServerError``;
``read_promise``, ``send_promise`` and ``task_of`` are such calls answered with a promise
or a task.

``Network.fences`` is how the SDK makes its fenced writes: troth's ``task.fences`` (several
``task.fence`` actions in one request, one commit, no preload: docs/semantics.md) while the
server answers it, else one standard ``task.fence`` each, from the first refusal on.
"""

from __future__ import annotations

import itertools
import logging
import os
import socket
from collections.abc import Awaitable, Callable, Collection
from typing import Any, Protocol

from troth.protocol.envelope import VERSION
from troth.protocol.kinds import Kind
from troth.protocol.messages import Message
from troth.protocol.records import PromiseRecord, TaskRecord
from troth.protocol.requests import (
    Data,
    FenceAction,
    PromiseGetRequest,
    TaskFenceRequest,
    TaskFencesRequest,
    TaskGetRequest,
)
from troth.protocol.responses import Reply, TaskFencesResult
from troth.sdk.clock import Clock
from troth.sdk.errors import ServerError
from troth.views.executions import ExecutionQuery, Page

log = logging.getLogger(__name__)

OnMessage = Callable[[Message], None]
OnConnect = Callable[[], Awaitable[None]]


class Network(Protocol):
    pid: str
    group: str
    clock: Clock

    async def send(self, kind: Kind, data: Data) -> Reply:
        """One request; raises ``NetworkError`` only when no answer could be had."""
        ...

    async def start(self, on_message: OnMessage, on_connect: OnConnect) -> None:
        """Begin receiving messages for this process; ``on_connect`` runs on every
        (re)connection so that listeners lost with a dropped stream can be renewed."""
        ...

    async def stop(self) -> None: ...

    async def executions(self, query: ExecutionQuery) -> Page:
        """A page of the executions list (``app.executions.list``): the server's
        ``GET /api/executions``, or the embedded database's own query."""
        raise NotImplementedError

    def twin(self) -> Network | None:
        """A network to the same place, as the same process, for another thread's event
        loop (the heartbeat's, ``troth.sdk.heartbeat``); None where there is none to make
        (embedded mode: the engine runs on this process's loop)."""
        return None

    async def call(self, kind: Kind, data: Data, expected: Collection[int] = (200,)) -> Reply:
        """One request whose reply must have one of the ``expected`` statuses: the reply,
        or ``ServerError`` (with the server's message) for any other status."""
        reply = await self.send(kind, data)
        status, body = reply
        if status not in expected:
            raise ServerError(kind, status, str(body))
        return reply

    # Whether the server answers troth's ``task.fences``: assumed until it says it does not
    # (a 400 naming the kind, as a server without the extension answers any unknown kind).
    batches_fences: bool = True

    async def fences(self, task_id: str, version: int, actions: list[FenceAction]) -> Reply:
        """Each of ``actions`` fenced at the task's ``version``, in order: a 200 whose body is
        a ``TaskFencesResult`` (each fence's own reply), or the error that refused them all.

        Against a server without the extension it sends the standard ``task.fence``
        requests one by one: the same sequence, only not in one commit."""
        if self.batches_fences:
            request = TaskFencesRequest(task_id, version, actions)
            status, body = await self.send(Kind.TASK_FENCES, request)
            if status == 403:
                # A server that authenticates refuses a kind it does not know with 403 when
                # the token is scoped: the standard requests tell which it was.
                fenced = await self._one_by_one(task_id, version, actions)
                if all(status != 403 for status, _ in fenced.body.fences):
                    self._without_extension()
                return fenced
            if not _unknown_kind(status, body, Kind.TASK_FENCES):
                return Reply(status, body)
            self._without_extension()
        return await self._one_by_one(task_id, version, actions)

    async def _one_by_one(self, task_id: str, version: int, actions: list[FenceAction]) -> Reply:
        fences = [
            await self.send(Kind.TASK_FENCE, TaskFenceRequest(task_id, version, action))
            for action in actions
        ]
        return Reply(200, TaskFencesResult(fences))

    def _without_extension(self) -> None:
        self.batches_fences = False
        log.info(
            "the server does not know troth's %s; fencing each write with %s from now on",
            Kind.TASK_FENCES,
            Kind.TASK_FENCE,
        )


# -- requests answered with a promise or a task ----------------------------------------------


async def read_promise(network: Network, id: str) -> PromiseRecord | None:
    """The promise as the server has it (projected), or None if it does not exist."""
    status, body = await network.call(Kind.PROMISE_GET, PromiseGetRequest(id), (200, 404))
    if status == 404:
        return None
    record: PromiseRecord = body.promise  # a PromiseResponse
    return record


async def send_promise(network: Network, kind: Kind, request: Any) -> PromiseRecord:
    """Send a request answered with a promise; the promise."""
    _, body = await network.call(kind, request)
    record: PromiseRecord = body.promise  # a PromiseResponse
    return record


async def task_of(network: Network, id: str) -> TaskRecord | None:
    """The task of promise ``id``, or None if it has none (a promise without a target)."""
    status, body = await network.call(Kind.TASK_GET, TaskGetRequest(id), (200, 404))
    if status == 404:
        return None
    task: TaskRecord = body.task  # a TaskGetResponse
    return task


def _unknown_kind(status: int, body: object, kind: Kind) -> bool:
    """The 400 a server answers for a kind it does not know (docs/references.md#request-kinds);
    every other refusal is about the request, and the batch is not re-sent."""
    return status == 400 and f"Unknown operation: {kind}" in str(body)


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
