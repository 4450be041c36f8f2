"""The single writer with group commit.

SQLite admits one writer at a time and a durable commit costs a sync of the log, so
committing each request on its own caps throughput at the disk's sync rate. The writer
instead takes every request queued so far, runs them in one transaction, each inside its
own SAVEPOINT (a request that raises is rolled back alone and gets the error; the others
keep their writes), commits once, and only then resolves each request's future. Nothing
is acknowledged before the commit that makes it durable.

Where each step runs is chosen for the GIL. The handlers are Python and their statements
take microseconds, so they run on the event loop's own thread, inline. Only the COMMIT,
which waits for the disk, goes to a thread of its own, so the loop keeps reading and
answering requests during the sync; the requests that arrive meanwhile form the next
batch. An earlier design ran whole batches on a writer thread: the sqlite3 module releases
the GIL around every statement, and a thread that gives the GIL up to a busy event loop
waits for the loop to yield it back (up to the 5 ms switch interval) once per statement,
which capped the server at a few thousand requests a second.

Committing the moment the disk is free splits a steady crowd of clients into two halves
that take turns: while one half's commit syncs, the loop does the other half's HTTP work.
That overlap is what a CPU-bound server wants. When the disk is slow to sync, though,
each half pays a whole sync and the loop idles, so then the writer remembers how many
requests were in flight during its last commit (its *demand*) and waits for that many to
queue up before the next one, but never longer than the last sync took (``MAX_GATHER`` at
most). "Slow" means the sync took longer than the HTTP work of the crowd would, which the
writer estimates as ``GATHER_RATIO`` times the time it spent running the batch's
handlers. A lone client meets its demand of one at once and never waits; when clients
leave, one short wait teaches the writer the smaller demand.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

from troth.storage.sqlite.store import SqliteStore

T = TypeVar("T")

Work = Callable[[SqliteStore], Any]

# ms ``BEGIN IMMEDIATE`` waits for another process's write lock. The wait happens off the
# loop: on the loop the write connection never waits (its busy timeout is 0).
LOCK_WAIT = 5000

MAX_GATHER = 0.002  # seconds a batch may wait for its demand to queue up
GATHER_RATIO = 2  # a request's HTTP work, in multiples of its handler's (measured: ~2)


class _Job(NamedTuple):
    work: Work
    future: asyncio.Future[Any]


class Writer:
    """Runs write jobs in batches on the calling event loop; one commit per batch.

    After each commit ``on_commit`` hears whether the batch enqueued a message, the
    earliest deadline it armed (None: none), how many jobs it ran and the seconds from its
    first statement to the durable commit.
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        retry_timeout: int,
        on_commit: Callable[[bool, int | None, int, float], None],
        max_batch: int = 512,
    ) -> None:
        conn.execute("PRAGMA busy_timeout = 0")
        self._conn = conn
        self._store = SqliteStore(conn, retry_timeout)
        self._on_commit = on_commit
        self._max_batch = max_batch
        self._queue: list[_Job] = []
        self._draining: asyncio.Task[None] | None = None  # runs batches while jobs queue
        self._demand = 1  # jobs in flight during the last commit
        self._sync_time = 0.0  # seconds the last COMMIT took
        self._run_time = 0.0  # seconds the last batch's handlers took
        self._gathered: asyncio.Future[None] | None = None  # set once the demand has queued
        # The thread that waits for the disk (COMMIT) and for other processes' locks.
        self.commit_thread = CommitThread()
        self.commits = 0  # write transactions committed; fewer than jobs under load
        # Why the last transaction failed as a whole (I/O, disk full), until one commits.
        self.failure: Exception | None = None
        self._closed = False

    def submit(self, work: Callable[[SqliteStore], T]) -> asyncio.Future[T]:
        """Queue ``work`` to run inside the next transaction; the future resolves after commit.

        Call it on the event loop; every job until the queue runs dry belongs to that loop.
        """
        if self._closed:
            raise RuntimeError("the SQLite writer is closed")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._queue.append(_Job(work, future))
        gathered = self._gathered
        if gathered is not None and len(self._queue) >= self._demand and not gathered.done():
            gathered.set_result(None)
        if self._draining is None:
            # A task's first step runs on the next loop turn, so every request that reaches
            # here in this turn joins the first batch.
            self._draining = loop.create_task(self._drain())
        return future

    async def close(self) -> None:
        """Finish every job queued so far, then stop and close the connection."""
        self._closed = True
        if self._draining is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(self._draining)
        self.commit_thread.shutdown()
        self._conn.close()

    async def _drain(self) -> None:
        try:
            while self._queue:
                await self._gather()
                batch = self._queue[: self._max_batch]
                del self._queue[: self._max_batch]
                await self._commit(batch)
                self._demand = min(len(batch) + len(self._queue), self._max_batch)
        finally:
            self._draining = None

    async def _gather(self) -> None:
        """When syncs are slow, wait briefly until as many jobs are queued as were in
        flight last time."""
        if len(self._queue) >= self._demand or self._sync_time < GATHER_RATIO * self._run_time:
            return
        self._gathered = asyncio.get_running_loop().create_future()
        try:
            async with asyncio.timeout(min(self._sync_time, MAX_GATHER)):
                await self._gathered
        except TimeoutError:
            # Fewer clients than before: expect fewer from now on.
            self._demand = max(1, len(self._queue))
        finally:
            self._gathered = None

    async def _commit(self, batch: list[_Job]) -> None:
        outcomes: list[tuple[_Job, bool, Any]] = []
        enqueued = False
        self._store.armed = None  # a job that fails may have armed one: a needless look only
        try:
            await self._begin()
            started = time.perf_counter()
            for job in batch:
                if job.future.done():
                    continue  # the caller gave up before the job started
                ok, value = self._run_one(job.work)
                outcomes.append((job, ok, value))
                enqueued = enqueued or (ok and self._store.enqueued)
            synced = time.perf_counter()
            self._run_time = synced - started
            await self.commit_thread.run(self._commit_now)
            self._sync_time = time.perf_counter() - synced
        except Exception as error:
            # The transaction itself failed (I/O, disk full, a lost savepoint): nothing in
            # it was committed, so every request in it fails.
            if self._conn.in_transaction:
                # If the connection is gone, the transaction dies with it.
                with contextlib.suppress(sqlite3.Error):
                    self._conn.execute("ROLLBACK")
            for job in batch:
                if not job.future.done():
                    job.future.set_exception(error)
            self.failure = error
            return
        self.commits += 1
        self.failure = None
        # Announce first, so a caller that sees its answer also sees the outbox signal.
        self._on_commit(
            enqueued, self._store.armed, len(outcomes), self._run_time + self._sync_time
        )
        for job, ok, value in outcomes:
            if job.future.done():
                continue
            if ok:
                job.future.set_result(value)
            else:
                job.future.set_exception(value)

    async def _begin(self) -> None:
        """Take the write lock; if another process holds it, wait for it off the loop."""
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as error:
            if error.sqlite_errorcode != sqlite3.SQLITE_BUSY:
                raise
            await self.commit_thread.run(self._begin_waiting)

    def _commit_now(self) -> None:
        self._conn.execute("COMMIT")

    def _begin_waiting(self) -> None:
        self._conn.execute(f"PRAGMA busy_timeout = {LOCK_WAIT}")
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        finally:
            self._conn.execute("PRAGMA busy_timeout = 0")

    def _run_one(self, work: Work) -> tuple[bool, Any]:
        """Run one job in a savepoint; its failure undoes its own writes only."""
        self._store.enqueued = False
        self._conn.execute("SAVEPOINT request")
        try:
            value = work(self._store)
        except Exception as error:
            # If SQLite already rolled back the whole transaction, this raises and the
            # batch fails as a whole.
            self._conn.execute("ROLLBACK TO request")
            self._conn.execute("RELEASE request")
            return False, error
        self._conn.execute("RELEASE request")
        return True, value


class CommitThread:
    """One thread running blocking calls in turn, each answered on its caller's event loop.

    What ``run_in_executor`` on a one-thread ``ThreadPoolExecutor`` does, without its
    ``concurrent.futures.Future`` chained to the asyncio one, its locks and its checks: a
    call is a tuple on a ``SimpleQueue`` and comes back by one ``call_soon_threadsafe``.
    A lone request commits alone, so it pays this hand-off in full: measured at about a
    fifth less CPU per request than the executor's, and a lower p50 (bench/README.md).
    """

    def __init__(self) -> None:
        self._calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        # A daemon, so an app that never closes its service still exits; close() joins it.
        self._thread = threading.Thread(target=self._serve, name="troth-sqlite-commit", daemon=True)
        self._thread.start()

    def run(self, call: Callable[[], T]) -> asyncio.Future[T]:
        """``call()`` in the thread, after every call queued before it; on the running loop,
        the future of its result or exception."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._calls.put(_Call(call, loop, future))
        return future

    def shutdown(self) -> None:
        """Finish the calls queued so far, then stop the thread."""
        self._calls.put(None)
        self._thread.join()

    def _serve(self) -> None:
        while (job := self._calls.get()) is not None:
            try:
                outcome: tuple[BaseException | None, Any] = (None, job.call())
            except BaseException as error:  # the caller's to handle, as an executor's would be
                outcome = (error, None)
            # A loop closed meanwhile has nobody waiting for the answer.
            with contextlib.suppress(RuntimeError):
                job.loop.call_soon_threadsafe(_answer, job.future, *outcome)


class _Call(NamedTuple):
    call: Callable[[], Any]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]


def _answer(future: asyncio.Future[Any], error: BaseException | None, result: Any) -> None:
    if future.cancelled():
        return  # the waiting task was cancelled: nobody to tell
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
