"""What the server needs from a storage backend: the machine behind one async interface.

A backend (SQLite, PostgreSQL) runs the engine's handlers inside its own transactions and
owns the durable outbox. The server (HTTP, poll hub, push delivery, the timeouts loop) talks
to it only through ``Service``, so every backend serves every transport unchanged.
``Service`` is the sum of four concerns (``Requests``, ``Timers``, ``Outbox``, ``Admin``);
each part of the server asks only for the one it uses.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from typing import NamedTuple, Protocol

from troth.protocol.envelope import Request
from troth.protocol.messages import Message
from troth.protocol.records import PromiseRecord, TaskState
from troth.protocol.responses import Reply, Snapshot
from troth.views.executions import ExecutionQuery, Page


class Retriable(Exception):
    """The request lost a race for its rows too many times; nothing was committed.

    A backend with concurrent writers (PostgreSQL) retries serialization failures, deadlocks
    and lock timeouts itself and raises this only when its retries run out. The request is
    safe to send again, so a server should answer it 503 (with ``Retry-After``), not 500.
    """


class Delivery(NamedTuple):
    """One outbox row handed out for delivery.

    ``seq`` identifies this version of the row: the outbox is a keyed upsert, so a newer
    message for the same key replaces the row with a new ``seq``, and acknowledging the old
    delivery must not delete the newer message.
    """

    seq: int
    address: str
    message: Message


class Requests(Protocol):
    """Request handling: what ``POST /`` and embedded mode run."""

    async def handle(self, request: Request, now: int) -> Reply:
        """Run one non-debug request in one transaction at instant ``now`` (ms).

        Writes, armed timeouts and outgoing messages commit together or not at all.
        Raises only for infrastructure failures (the server answers 500).
        """
        ...


class Timers(Protocol):
    """The timer sweep: what the timeouts loop and ``debug.tick`` drive."""

    async def fire_due(self, now: int) -> int:
        """Fire every timeout due at ``now``, earliest first, each in its own transaction.

        Returns how many transitions fired. ``debug.tick`` is this with the tick's time.
        """
        ...

    async def next_deadline(self) -> int | None:
        """The earliest armed timeout, or None; the timeouts loop sleeps until then."""
        ...


class Sweeps(Timers, Protocol):
    """A backend's timers, which may defer idle retries: a due retry whose task's execute
    still waits in the outbox is marked deferred instead of fired, and passed by until
    that message is delivered (``troth.engine.timeouts.defer_idle_retry``). The server's
    timeouts loop defers (``troth.server.timers``); ``debug.tick`` does not."""

    async def fire_due(self, now: int, *, defer_idle: bool = False) -> int: ...

    async def next_deadline(self, *, defer_idle: bool = False) -> int | None:
        """With ``defer_idle``, the earliest armed timeout that is not a deferred retry."""
        ...


class Outbox(Protocol):
    """The durable outbox, read and emptied by delivery after each commit."""

    # Whether rows become visible in ``seq`` order (one writer at a time): then a reader
    # that has read every row up to seq s meets only new rows after s.
    outbox_in_order: bool

    async def undelivered(
        self, limit: int, *, after: int = 0, groups: Collection[str] | None = None
    ) -> list[Delivery]:
        """Up to ``limit`` undelivered messages after seq ``after``, oldest first; with
        ``groups``, poll messages only of those groups (``troth.storage.reach``), may also
        leave out rows another server holds a claim on. Nothing is removed."""
        ...

    async def last_seq(self) -> int:
        """The highest ``seq`` in the outbox (0: empty). Where rows become visible in seq
        order, a reader that asked this before a read that came back short has been shown
        every row up to it that it asked for: the rows it was not shown were filtered out,
        and reading on from here need not scan them again."""
        ...

    async def claim(self, deliveries: list[Delivery], holder: str, ttl: int) -> list[Delivery]:
        """Those of ``deliveries`` that ``holder`` (one server) may deliver now.

        Where several servers share the outbox, each delivery goes to one of them: it is
        claimed for ``holder`` for ``ttl`` ms, and others are refused it until the claim
        lapses (the holder died) or is given up (``ttl`` 0). ``holder`` renews its own
        claims. A backend that one server owns answers every delivery.
        """
        ...

    async def ack(self, deliveries: list[Delivery], now: int | None = None) -> None:
        """Remove delivered rows, except those superseded since they were read; with
        ``now`` (the instant of delivery, the server's), also fire at ``now`` the deferred
        retries (``Sweeps``) of the executes delivered."""
        ...

    def outbox_changed(self) -> asyncio.Event:
        """An ``asyncio.Event`` set after every commit that enqueued a message."""
        ...


class StorageEvents(Protocol):
    """What a backend reports as it works, for the server's metrics (``troth.server.metrics``).

    Called on the event loop, after the commit the report is about; each must be cheap, as
    ``committed`` runs once per write transaction.
    """

    def committed(self, requests: int, seconds: float) -> None:
        """A write transaction of ``requests`` jobs (a group commit) committed, taking
        ``seconds`` from its start to the durable commit."""
        ...

    def scheduled(self, promises: int) -> None:
        """Schedules created ``promises`` promises (their occurrences)."""
        ...


class NoEvents:
    """The reports of a backend nobody measures: embedded mode and tests."""

    def committed(self, requests: int, seconds: float) -> None:
        pass

    def scheduled(self, promises: int) -> None:
        pass


class PoolStats(NamedTuple):
    """A connection pool's counters since it opened (PostgreSQL)."""

    size: int  # connections open
    waiting: int  # requests waiting for a connection now
    waits: int  # requests that had to wait for a connection
    wait_seconds: float  # time they waited, together
    timeouts: int  # requests that gave up waiting


class StorageStats(NamedTuple):
    """The gauges a scrape reads from storage (``Admin.stats``): counts over the outbox and
    the halted tasks' index range, so their cost grows with the backlog, never with the
    promises kept."""

    outbox_depth: int  # undelivered messages
    outbox_head: int | None  # the seq of the oldest undelivered message
    halted_tasks: int
    pool: PoolStats | None  # None: no pool (SQLite)


class Admin(Protocol):
    """Operating the store: the debug kinds' snapshot and reset, readiness, metrics,
    shutdown."""

    backend: str  # "sqlite", "postgres": the label of its metrics
    events: StorageEvents  # the server replaces the default ``NoEvents`` with its metrics

    async def stats(self) -> StorageStats: ...

    async def snapshot(self) -> Snapshot: ...

    async def reset(self) -> None:
        """Delete everything (``debug.reset``)."""
        ...

    async def ping(self) -> bool:
        """True when storage answers (``GET /ready``)."""
        ...

    async def close(self) -> None: ...


class Views(Protocol):
    """The operator's reads (``troth.views``: the JSON API, the console, the CLI on a
    database file), each along an index, never a scan of every promise."""

    async def executions(self, query: ExecutionQuery) -> Page:
        """A page of executions (root promises with a task), newest first."""
        ...

    async def family(self, id: str) -> list[PromiseRecord]:
        """Promise ``id`` and every promise below it in its call tree (``tree.build`` reads
        them as one); [] if there is no promise ``id``."""
        ...

    async def tasks(self, ids: list[str]) -> dict[str, TaskState]:
        """The state of the task of each of ``ids`` that has one (a tree's halted nodes)."""
        ...


class Service(Requests, Sweeps, Outbox, Admin, Views, Protocol):
    """Everything a backend provides; each part of the server depends only on the
    concern it uses (the timeouts loop on ``Timers``, delivery on ``Outbox``)."""
