"""``SqliteService``: the embedded default backend behind ``troth.storage.service.Service``.

Writes go through the group-committing ``Writer``, which runs them on the event loop and
syncs in a thread of its own; reads (the kinds that never write, the outbox, the snapshot)
are answered by a small pool of reader connections, which WAL lets run beside the writer,
so a read never waits behind a commit.

Several processes may open one file (embedded apps, scripts, the CLI). Each holds a shared
lock on ``<db>.lock`` while it has the file open (``liveness``), and notices the others'
commits through ``committed_elsewhere``.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from troth.engine import READ_ONLY, fire, handle
from troth.engine.timeouts import LEAN, CatchUp
from troth.protocol.envelope import Request
from troth.protocol.records import PromiseRecord, TaskState
from troth.protocol.responses import Reply, Snapshot
from troth.storage.service import Delivery, NoEvents, StorageEvents, StorageStats
from troth.storage.snapshot import snapshot
from troth.storage.sql import views
from troth.storage.sql.dialect import SQLITE
from troth.storage.sql.outbox import last_seq, undelivered
from troth.storage.sql.schema import clear
from troth.storage.sql.stats import storage_stats
from troth.storage.sqlite import liveness, outbox, schema
from troth.storage.sqlite.store import SqliteStore
from troth.storage.sqlite.writer import Writer
from troth.views.executions import ExecutionQuery, Page

T = TypeVar("T")

# Timeouts fired per write job: each in its own savepoint, the batch in one commit. The job
# runs on the event loop, so it also stops after FIRE_BUDGET seconds of transitions: a
# backlog of any size is fired in slices that leave the loop free to answer requests.
FIRE_BATCH = 256
FIRE_BUDGET = 0.01


class SqliteService:
    """The machine on one SQLite file.

    ``retry_timeout`` is Lean's ``config.retryTimeout`` (ms). ``synchronous`` is SQLite's
    pragma: ``FULL`` (the default) makes every acknowledged write survive power loss;
    ``NORMAL`` keeps it across a process crash only, and is faster. ``catch_up`` is how
    schedules catch up on missed occurrences (``troth.engine.timeouts.CatchUp``).
    """

    def __init__(
        self,
        path: str,
        *,
        retry_timeout: int = 5000,
        synchronous: str = "FULL",
        readers: int = 4,
        owner: str | None = None,
        catch_up: CatchUp = LEAN,
    ) -> None:
        if retry_timeout <= 0:
            # A non-positive retry would re-arm a due retry at a due instant for ever.
            raise ValueError("retry_timeout must be positive")
        self.path = path
        self.retry_timeout = retry_timeout
        self.catch_up = catch_up
        self._synchronous = synchronous
        # ``owner``: "server" takes the file for itself, "embedded" shares it with other
        # embedded apps, None (tests, read-only tools) takes no part (``liveness``).
        self._owner = (
            liveness.hold_owner(path, owner == "server", f"troth serve (pid {os.getpid()})")
            if owner is not None
            else None
        )
        try:
            conn = schema.connect(path, synchronous=synchronous)
        except BaseException:
            self._release_owner()
            raise
        try:
            schema.migrate(conn)
            self._lock = liveness.hold_shared(path)
        except BaseException:
            conn.close()
            self._release_owner()
            raise
        self._changed = asyncio.Event()
        self.events: StorageEvents = NoEvents()
        # Hears the earliest deadline each commit of this process armed (embedded mode's
        # timeouts loop, which looks again only if it comes before the one it awaits).
        self.on_armed: Callable[[int], None] | None = None
        self._writer = Writer(conn, retry_timeout, self._committed)
        self._readers = ThreadPoolExecutor(readers, thread_name_prefix="troth-sqlite-reader")
        self._reader_conns: list[sqlite3.Connection] = []
        self._reader_local = threading.local()
        self._reader_lock = threading.Lock()
        self._watcher: sqlite3.Connection | None = None  # see ``committed_elsewhere``
        self._data_version: int | None = None

    @property
    def commits(self) -> int:
        """Write transactions committed so far; group commit keeps it below the writes."""
        return self._writer.commits

    # -- the Service interface --------------------------------------------------------------

    async def handle(self, request: Request, now: int) -> Reply:
        if request.kind in READ_ONLY:
            return await self._read(lambda store: handle(store, request, now))
        return await self._write(lambda store: handle(store, request, now))

    async def fire_due(self, now: int, *, defer_idle: bool = False) -> int:
        """Fire due timeouts in firing order until none is due at ``now``, a bounded slice
        per transaction (``FIRE_BATCH``, ``FIRE_BUDGET``), yielding between slices; with
        ``defer_idle``, defer the idle retries instead (``Timers.fire_due``).

        A transition that raises is rolled back alone; the ones fired before it commit and
        the error is raised after that commit.
        """
        total = 0
        policy = self.catch_up
        while True:
            fired, scheduled, done, error = await self._write(
                lambda store: _fire_some(store, now, FIRE_BATCH, policy, defer_idle)
            )
            total += fired
            if scheduled:
                self.events.scheduled(scheduled)
            if error is not None:
                raise error
            if done:
                return total

    async def next_deadline(self, *, defer_idle: bool = False) -> int | None:
        timeout = await self._read(lambda store: store.next_timeout(deferring=defer_idle))
        return None if timeout is None else timeout.at

    backend = "sqlite"

    # Rows commit in seq order (one writer at a time, ``undelivered`` below).
    outbox_in_order = True

    async def undelivered(
        self, limit: int, *, after: int = 0, groups: Collection[str] | None = None
    ) -> list[Delivery]:
        """As ``Outbox.undelivered``.

        Rows commit in ``seq`` order on SQLite (one writer at a time), so a reader that has
        seen every row up to ``seq`` s and left some (another process's unicast messages)
        can read on from s and meet only rows it has not seen.
        """
        return await self._read(lambda store: undelivered(store.conn, SQLITE, limit, after, groups))

    async def last_seq(self) -> int:
        return await self._read(lambda store: last_seq(store.conn))

    async def claim(self, deliveries: list[Delivery], holder: str, ttl: int) -> list[Delivery]:
        """Those still in the outbox: one server owns a SQLite file, so nobody else delivers
        its rows, but a row read a while ago may have been superseded or reset since."""
        if not deliveries:
            return []
        seqs = [delivery.seq for delivery in deliveries]
        there = await self._read(lambda store: outbox.present(store.conn, seqs))
        return [delivery for delivery in deliveries if delivery.seq in there]

    async def ack(self, deliveries: list[Delivery], now: int | None = None) -> None:
        seqs = [delivery.seq for delivery in deliveries]
        retry = self.retry_timeout
        if seqs:
            await self._write(lambda store: outbox.acknowledge(store.conn, seqs, now, retry))

    def outbox_changed(self) -> asyncio.Event:
        """Set after each commit that enqueued a message; the delivery loop clears it
        before reading the outbox, so no commit goes unnoticed."""
        return self._changed

    async def snapshot(self) -> Snapshot:
        return await self._read(lambda store: snapshot(store.conn))

    async def executions(self, query: ExecutionQuery) -> Page:
        return await self._read(lambda store: views.executions(store.conn, SQLITE, query))

    async def family(self, id: str) -> list[PromiseRecord]:
        return await self._read(lambda store: views.family(store.conn, SQLITE, id))

    async def tasks(self, ids: list[str]) -> dict[str, TaskState]:
        return await self._read(lambda store: views.task_states(store.conn, SQLITE, ids))

    async def reset(self) -> None:
        await self._write(lambda store: clear(store.conn))

    async def stats(self) -> StorageStats:
        return await self._read(lambda store: storage_stats(store.conn, SQLITE, pool=None))

    async def ping(self) -> bool:
        """Whether storage answers, and takes writes if the last write transaction failed."""
        try:
            await self._read(lambda store: store.conn.execute("SELECT 1").fetchone())
            if self._writer.failure is not None:
                # Reads still work on a full disk: only a write tells whether writes do.
                await self._write(
                    lambda store: (
                        store.conn.execute("UPDATE health SET probed_at = probed_at + 1").rowcount
                    )
                )
        except (sqlite3.Error, OSError):
            return False
        return True

    async def close(self) -> None:
        await self._writer.close()
        self._readers.shutdown(wait=True)
        with self._reader_lock:
            for conn in self._reader_conns:
                conn.close()
            self._reader_conns.clear()
        if self._watcher is not None:
            self._watcher.close()
            self._watcher = None
        if self._lock is not None:
            os.close(self._lock)  # releases the lock: this process no longer uses the file
            self._lock = None
        self._release_owner()

    def _release_owner(self) -> None:
        if self._owner is not None:
            os.close(self._owner)
            self._owner = None

    # -- several processes on one file --------------------------------------------------------

    async def committed_elsewhere(self) -> bool:
        """Whether another connection to the file has committed since the last call.

        SQLite's ``PRAGMA data_version`` on one connection changes when any *other*
        connection commits; reading it costs a look at the WAL index in shared memory, not a
        query of any table, so it can be asked a few times a second. The connection asked is
        a dedicated one, so this process's own writer counts as another connection: its
        commits answer True too (harmless, and they announce themselves anyway). The first
        call answers True: nothing is known of what came before it. Call it from one task at
        a time.
        """
        loop = asyncio.get_running_loop()
        version = await loop.run_in_executor(self._readers, self._read_data_version)
        changed = version != self._data_version
        self._data_version = version
        return changed

    def _read_data_version(self) -> int:
        if self._watcher is None:
            self._watcher = schema.connect(self.path, synchronous=self._synchronous, read_only=True)
        return self._watcher.execute("PRAGMA data_version").fetchone()[0]

    async def recover_abandoned(self, pid: str, now: int) -> bool:
        """For the embedded owner only (an app running the engine in-process as ``pid``),
        once, before it takes any work: if no other process has the file open, take back
        at ``now`` what dead processes held (``liveness.take_back``). Returns whether it did.

        The holder of an acquired task is known dead because of the lock every
        ``SqliteService`` holds while the file is open (``liveness``): when nobody else holds
        it, no other process uses the file, and this one holds no task yet. A server must not
        call this: its tasks are held by remote workers, which the lock knows nothing of.
        """
        fd = self._lock
        if fd is None:
            return False

        def probe(store: SqliteStore) -> bool:
            if not liveness.alone(fd):
                return False
            liveness.take_back(store.conn, pid, now)
            return True

        return await self._write(probe)

    # -- plumbing ---------------------------------------------------------------------------

    async def _write(self, work: Callable[[SqliteStore], T]) -> T:
        return await self._writer.submit(work)

    async def _read(self, work: Callable[[SqliteStore], T]) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._readers, self._read_now, work)

    def _read_now(self, work: Callable[[SqliteStore], T]) -> T:
        """Run ``work`` in one read transaction, so it sees a single committed state."""
        conn = self._reader()
        conn.execute("BEGIN")
        try:
            return work(SqliteStore(conn, self.retry_timeout))
        finally:
            conn.execute("ROLLBACK")

    def _reader(self) -> sqlite3.Connection:
        conn = getattr(self._reader_local, "conn", None)
        if conn is None:
            conn = schema.connect(self.path, synchronous=self._synchronous, read_only=True)
            self._reader_local.conn = conn
            with self._reader_lock:
                self._reader_conns.append(conn)
        return conn

    def _committed(self, enqueued: bool, armed: int | None, jobs: int, seconds: float) -> None:
        """Called on the event loop after each commit."""
        if enqueued:
            self._changed.set()
        if armed is not None and self.on_armed is not None:
            self.on_armed(armed)
        self.events.committed(jobs, seconds)


def _fire_some(
    store: SqliteStore, now: int, limit: int, policy: CatchUp, defer_idle: bool
) -> tuple[int, int, bool, Exception | None]:
    """Fire up to ``limit`` due timeouts (fewer once ``FIRE_BUDGET`` is spent), earliest
    first, each in its own savepoint (with ``defer_idle``, deferring the idle retries);
    how many fired, how many promises schedules created, and whether none is left due."""
    fired = scheduled = 0
    started = time.perf_counter()
    while fired < limit and time.perf_counter() - started < FIRE_BUDGET:
        timeout = store.next_timeout(deferring=defer_idle)
        if timeout is None or timeout.at > now:
            return fired, scheduled, True, None
        store.conn.execute("SAVEPOINT fire")
        try:
            created = fire(store, timeout, now, policy, defer_idle=defer_idle)
        except Exception as error:
            store.conn.execute("ROLLBACK TO fire")
            store.conn.execute("RELEASE fire")
            return fired, scheduled, False, error
        store.conn.execute("RELEASE fire")
        fired += 1
        scheduled += created
    return fired, scheduled, False, None
