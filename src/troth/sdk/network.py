"""The transport seam: everything above it is the same in embedded and remote mode.

A ``Network`` sends one typed request and answers a ``Reply`` whose body is the typed
response of its kind (``troth.protocol.Kind.responses``; for an error status, the server's
message), and it pushes incoming messages (``troth.protocol.Message``: ``Execute``,
``Unblock``) to one callback. ``HttpNetwork`` speaks HTTP and SSE to any conformant server;
``LocalNetwork`` runs the engine in-process.

``Network.call`` is how the SDK sends a request whose every unexpected status is the
caller's error: the reply if its status is one the caller handles, else ``ServerError``.
"""

from __future__ import annotations

import itertools
import os
import socket
from collections.abc import Awaitable, Callable, Collection
from typing import Protocol

from troth.protocol.envelope import VERSION
from troth.protocol.kinds import Kind
from troth.protocol.messages import Message
from troth.protocol.requests import Data
from troth.protocol.responses import Reply
from troth.sdk.clock import Clock
from troth.sdk.errors import ServerError

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

    async def call(self, kind: Kind, data: Data, expected: Collection[int] = (200,)) -> Reply:
        """One request whose reply must have one of the ``expected`` statuses: the reply,
        or ``ServerError`` (with the server's message) for any other status."""
        reply = await self.send(kind, data)
        status, body = reply
        if status not in expected:
            raise ServerError(kind, status, str(body))
        return reply


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
