"""Queues declared in code: ``app.queue("llm", concurrency=20, key_concurrency=2, ...)``.

The limits are kept by the server (or the embedded engine), not by this process: every
worker and every server on one database sees the same slots (``troth.engine.queues``,
docs/queues.md). An app declares its queues when it starts (``queue.set``, troth's own
request kind); declaring one again with other limits changes them for everyone, as a DBOS
queue declared in code does. A server without queues refuses the kind, and the app's start
fails saying so, rather than running the executions unlimited.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol, Unpack

from troth.protocol.kinds import Kind
from troth.protocol.queues import QueueSetRequest, QueueSpec, Rate
from troth.sdk.errors import ServerError
from troth.sdk.network import Network
from troth.sdk.options import StartOptions
from troth.sdk.signatures import ExecutionStart


class Starts(Protocol):
    """What ``app.options(...)`` returns: ``run`` and ``rpc`` with those options."""

    @property
    def run(self) -> ExecutionStart: ...

    @property
    def rpc(self) -> ExecutionStart: ...


class StartOptionsOf(Protocol):
    """``app.options``."""

    def __call__(self, **given: Unpack[StartOptions]) -> Starts: ...


@dataclass(frozen=True)
class RateLimit:
    """At most ``limit`` executions start in any ``period`` (a sliding window: never a
    burst over it, whatever the moment the window is measured from)."""

    limit: int
    period: timedelta

    def __post_init__(self) -> None:
        if isinstance(self.limit, bool) or not isinstance(self.limit, int) or self.limit < 1:
            raise ValueError(f"a rate's limit is an integer >= 1, not {self.limit!r}")
        if not isinstance(self.period, timedelta) or self.period < timedelta(milliseconds=1):
            raise ValueError(f"a rate's period is a timedelta of 1 ms or more, not {self.period!r}")

    def wire(self) -> Rate:
        return Rate(self.limit, round(self.period.total_seconds() * 1000))


def spec(
    name: str,
    concurrency: int | None,
    key_concurrency: int | None,
    rate: RateLimit | None,
    key_rate: RateLimit | None,
    priority: bool,
) -> QueueSpec:
    """The wire declaration, with each bad limit refused here, by name."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"a queue's name is a non-empty string, not {name!r}")
    for field, limit in (("concurrency", concurrency), ("key_concurrency", key_concurrency)):
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int) or limit < 1
        ):
            raise ValueError(f"queue {name!r}: {field} is an integer >= 1 or None, not {limit!r}")
    for field, given in (("rate", rate), ("key_rate", key_rate)):
        if given is not None and not isinstance(given, RateLimit):
            raise TypeError(f"queue {name!r}: {field} is a RateLimit or None, not {given!r}")
    return QueueSpec(
        name,
        concurrency,
        key_concurrency,
        rate.wire() if rate else None,
        key_rate.wire() if key_rate else None,
        bool(priority),
    )


def _positive(limit: object) -> bool:
    return isinstance(limit, int) and limit >= 1


class Queue:
    """A queue of executions: start them through it and they run when it has room.

    ``llm.options(key=customer_id, priority=1).run("job-7", summarize, doc)``; ``run``
    and ``rpc`` without options put the execution in the queue with the empty key.
    """

    def __init__(self, spec: QueueSpec, options: StartOptionsOf) -> None:
        self.spec = spec
        self._options = options

    @property
    def name(self) -> str:
        return self.spec.name

    def options(self, *, key: str | None = None, **given: Unpack[StartOptions]) -> Starts:
        """``run`` and ``rpc`` in this queue, under ``key`` (executions of one key are
        limited together and served in turn with other keys), with a ``priority`` (lower
        first, in a queue declared with ``priority=True``) and any other start option."""
        if "queue" in given or "queue_key" in given:
            raise TypeError("a queue's options name no other queue: use key= for the key")
        if given.get("priority") is not None and not self.spec.priority:
            raise ValueError(
                f"queue {self.name!r} was declared without priority=True: a priority would "
                "be ignored"
            )
        queued: StartOptions = {**given, "queue": self.name, "queue_key": key}
        return self._options(**queued)

    @property
    def run(self) -> ExecutionStart:
        """``options().run``: start an execution in this queue, with the empty key."""
        return self.options().run

    @property
    def rpc(self) -> ExecutionStart:
        """``options().rpc``."""
        return self.options().rpc


async def declare(network: Network, queues: Mapping[str, Queue]) -> None:
    """Send each queue's declaration; a server without queues fails the start, loudly."""
    for queue in queues.values():
        status, body = await network.send(Kind.QUEUE_SET, QueueSetRequest(queue.spec))
        if status == 400 and f"Unknown operation: {Kind.QUEUE_SET}" in str(body):
            raise ServerError(
                Kind.QUEUE_SET,
                status,
                f"this server has no queues (troth's extension), so queue {queue.name!r} "
                "cannot be kept; run troth serve from a troth with queues",
            )
        if status != 200:
            raise ServerError(Kind.QUEUE_SET, status, str(body))
