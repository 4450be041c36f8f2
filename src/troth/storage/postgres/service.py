"""``PostgresService``: the machine on a PostgreSQL database several servers share.

Each request runs the engine's handler in one transaction of its own on a pooled
connection (``transaction``), in a worker thread, since the handlers are synchronous. No
group commit: PostgreSQL commits many connections in parallel and groups their WAL flushes
itself. Concurrency between transactions, in this process or another server's, is handled
by the object locks (``locks``); losing a race is retried, and ``Retriable`` reports a
request that kept losing (a server should answer it 503, not 500).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from troth.engine import READ_ONLY, Timeout, handle
from troth.engine.timeouts import LEAN, CatchUp
from troth.protocol.envelope import Request
from troth.protocol.records import PromiseRecord, TaskState
from troth.protocol.responses import Reply, Snapshot
from troth.storage.postgres import connection, outbox, schema
from troth.storage.postgres.listener import OutboxListener
from troth.storage.postgres.store import PostgresStore
from troth.storage.postgres.sweep import Run, fire_run
from troth.storage.postgres.transaction import transact
from troth.storage.service import (
    Delivery,
    NoEvents,
    PoolStats,
    Retriable,
    StorageEvents,
    StorageStats,
)
from troth.storage.snapshot import snapshot
from troth.storage.sql import views
from troth.storage.sql.dialect import POSTGRES
from troth.storage.sql.outbox import last_seq
from troth.storage.sql.schema import clear
from troth.storage.sql.stats import storage_stats
from troth.views.executions import ExecutionQuery, Page

T = TypeVar("T")

CONNECTION_WAIT = 5.0  # seconds a request waits for a pooled connection before a 503

# Due timeouts read per scan of the sweep, and fired at most per transaction.
FIRE_RUN = 64


class PostgresService:
    """The machine on the PostgreSQL database at ``url`` (a libpq URL or DSN).

    ``retry_timeout`` is Lean's ``config.retryTimeout`` (ms). ``pool_size`` connections
    (and as many worker threads) serve requests; one more listens for other servers'
    outbox notifications once ``outbox_changed`` is first asked for. A transaction aborted
    by a concurrent one is retried up to ``retries`` times; ``lock_timeout_ms`` bounds a
    wait for an object lock. ``catch_up`` is how schedules catch up on missed occurrences
    (``troth.engine.timeouts.CatchUp``).
    """

    def __init__(
        self,
        url: str,
        *,
        retry_timeout: int = 5000,
        pool_size: int = 10,
        retries: int = 8,
        lock_timeout_ms: int = 5000,
        catch_up: CatchUp = LEAN,
    ) -> None:
        if retry_timeout <= 0:
            # A non-positive retry would re-arm a due retry at a due instant for ever.
            raise ValueError("retry_timeout must be positive")
        if pool_size < 1 or retries < 0 or lock_timeout_ms < 1:
            raise ValueError("pool_size and lock_timeout_ms must be positive, retries >= 0")
        self.url = url
        self.retry_timeout = retry_timeout
        self.retries = retries
        self.catch_up = catch_up
        with connection.connect(url) as conn:
            schema.migrate(conn)
        self._pool = ConnectionPool(
            url,
            min_size=1,
            max_size=pool_size,
            kwargs={"autocommit": True},
            configure=functools.partial(connection.configure, lock_timeout=lock_timeout_ms),
            # Checked before each use: after a database restart an idle connection is dead,
            # and is replaced here rather than failing the request that draws it.
            check=ConnectionPool.check_connection,
            # A request waits this long (s) for a connection, then is answered 503.
            timeout=CONNECTION_WAIT,
            name="troth-postgres",
            open=True,
        )
        self._threads = ThreadPoolExecutor(pool_size, thread_name_prefix="troth-postgres")
        self._changed = asyncio.Event()
        self.events: StorageEvents = NoEvents()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listener: OutboxListener | None = None

    # -- the Service interface --------------------------------------------------------------

    async def handle(self, request: Request, now: int) -> Reply:
        work = functools.partial(handle, request=request, now=now)
        return await self._transact(work, write=request.kind not in READ_ONLY)

    async def fire_due(self, now: int, *, defer_idle: bool = False) -> int:
        """Fire due timeouts in firing order until none is due at ``now`` (``sweep``), in
        transactions of bounded work (``FIRE_RUN`` timeouts, one schedule catch-up chunk);
        with ``defer_idle``, defer the idle retries instead (``Timers.fire_due``).

        When every due timeout is held by another transaction, the sweep waits for the
        first of them, so it returns only when nothing is due. A transition that raises
        rolls back its run; the sweep then fires that run one timeout per transaction, so
        the ones before the failing one commit, and raises the error.
        """
        fired = 0
        while True:
            due = await self._transact(
                lambda store: store.due(now, FIRE_RUN, deferring=defer_idle), write=False
            )
            if not due:
                return fired
            sweep = functools.partial(self._fire, now=now, defer_idle=defer_idle)
            try:
                run = await sweep(due, wait=False)
            except Retriable:
                raise
            except Exception:
                for timeout in due:
                    fired += (await sweep([timeout], wait=False)).fired
                raise
            fired += run.fired
            if not run.progressed:
                fired += (await sweep(due[:1], wait=True)).fired

    async def next_deadline(self, *, defer_idle: bool = False) -> int | None:
        timeout = await self._transact(
            lambda store: store.next_timeout(deferring=defer_idle), write=False
        )
        return None if timeout is None else timeout.at

    backend = "postgres"

    # Rows commit out of seq order (concurrent transactions draw seqs before they commit),
    # so reading on from the last seq seen could miss a row that commits late.
    outbox_in_order = False

    async def undelivered(
        self, limit: int, *, after: int = 0, groups: Collection[str] | None = None
    ) -> list[Delivery]:
        """As ``Outbox.undelivered``; a delivery read (``groups`` given) also leaves out rows
        under a live claim: in flight, backing off, or another server's."""
        unclaimed = groups is not None
        return await self._transact(
            lambda store: outbox.undelivered(store.conn, limit, after, groups, unclaimed)
        )

    async def last_seq(self) -> int:
        return await self._transact(lambda store: last_seq(store.conn))

    async def claim(self, deliveries: list[Delivery], holder: str, ttl: int) -> list[Delivery]:
        if not deliveries:
            return []
        seqs = [delivery.seq for delivery in deliveries]
        claimed = await self._transact(
            lambda store: outbox.claim(store.conn, seqs, holder, ttl), write=True
        )
        return [delivery for delivery in deliveries if delivery.seq in claimed]

    async def ack(self, deliveries: list[Delivery], now: int | None = None) -> None:
        seqs = [delivery.seq for delivery in deliveries]
        retry = self.retry_timeout
        if seqs:
            await self._transact(
                lambda store: outbox.acknowledge(store.conn, seqs, now, retry), write=True
            )

    def outbox_changed(self) -> asyncio.Event:
        """Set after each local commit that enqueued a message, and whenever another
        server's NOTIFY arrives; the delivery loop clears it before reading the outbox."""
        with contextlib.suppress(RuntimeError):
            self._loop = asyncio.get_running_loop()
        if self._listener is None:
            self._listener = OutboxListener(self.url, self._heard)
        return self._changed

    async def snapshot(self) -> Snapshot:
        return await self._transact(lambda store: snapshot(store.conn))

    async def executions(self, query: ExecutionQuery) -> Page:
        return await self._transact(lambda store: views.executions(store.conn, POSTGRES, query))

    async def family(self, id: str) -> list[PromiseRecord]:
        return await self._transact(lambda store: views.family(store.conn, POSTGRES, id))

    async def tasks(self, ids: list[str]) -> dict[str, TaskState]:
        return await self._transact(lambda store: views.task_states(store.conn, POSTGRES, ids))

    async def reset(self) -> None:
        await self._transact(lambda store: clear(store.conn), write=True)

    async def stats(self) -> StorageStats:
        pool = self._pool.get_stats()
        waits = PoolStats(
            size=pool.get("pool_size", 0),
            waiting=pool.get("requests_waiting", 0),
            waits=pool.get("requests_queued", 0),
            wait_seconds=pool.get("requests_wait_ms", 0) / 1000,
            timeouts=pool.get("requests_errors", 0),
        )
        return await self._transact(lambda store: storage_stats(store.conn, POSTGRES, pool=waits))

    async def ping(self) -> bool:
        try:
            await self._transact(lambda store: store.conn.execute("SELECT 1").fetchone())
        except (psycopg.Error, PoolTimeout):
            return False
        return True

    async def close(self) -> None:
        if self._listener is not None:
            await asyncio.to_thread(self._listener.close)
        await asyncio.to_thread(self._threads.shutdown)
        await asyncio.to_thread(self._pool.close)

    # -- plumbing ---------------------------------------------------------------------------

    async def _transact(self, work: Callable[[PostgresStore], T], *, write: bool = False) -> T:
        loop = self._loop = asyncio.get_running_loop()
        run = functools.partial(
            transact, self._pool, work, self.retry_timeout, write=write, retries=self.retries
        )
        started = time.perf_counter()
        value, enqueued = await loop.run_in_executor(self._threads, run)
        if enqueued:
            self._changed.set()
        if write:
            # From asking for a connection to the COMMIT answered, races retried included:
            # what a request waits for storage. No group commit here, so one job per commit.
            self.events.committed(1, time.perf_counter() - started)
        return value

    async def _fire(
        self, due: list[Timeout], now: int, *, wait: bool, defer_idle: bool = False
    ) -> Run:
        work = functools.partial(
            fire_run, due=due, now=now, wait=wait, policy=self.catch_up, defer_idle=defer_idle
        )
        run = await self._transact(work, write=True)
        if run.scheduled:
            self.events.scheduled(run.scheduled)
        return run

    def _heard(self) -> None:
        """Called by the listener thread on each notification."""
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed: nobody listens
                loop.call_soon_threadsafe(self._changed.set)
