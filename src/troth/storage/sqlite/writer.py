"""The single writer with group commit.

SQLite admits one writer at a time and a durable commit costs a sync of the log, so
committing each request on its own caps throughput at the disk's sync rate. One thread
owns the write connection instead: it takes every request queued so far, runs them in one
transaction, each inside its own SAVEPOINT (a request that raises is rolled back alone and
gets the error; the others keep their writes), commits once, and only then resolves each
request's future. Nothing is acknowledged before the commit that makes it durable.
"""

from __future__ import annotations

import contextlib
import queue
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, NamedTuple, TypeVar

from troth.storage.sqlite.store import SqliteStore

T = TypeVar("T")

Work = Callable[[SqliteStore], Any]


class _Job(NamedTuple):
    work: Work
    future: Future[Any]


class _Stop:
    """The sentinel that ends the writer once the jobs queued before it are done."""


class Writer:
    def __init__(
        self,
        conn: sqlite3.Connection,
        retry_timeout: int,
        on_commit: Callable[[bool], None],
        max_batch: int = 512,
    ) -> None:
        self._conn = conn
        self._store = SqliteStore(conn, retry_timeout)
        self._on_commit = on_commit
        self._max_batch = max_batch
        self._queue: queue.SimpleQueue[_Job | _Stop] = queue.SimpleQueue()
        self.commits = 0  # write transactions committed; fewer than jobs under load
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="troth-sqlite-writer", daemon=True)
        self._thread.start()

    def submit(self, work: Callable[[SqliteStore], T]) -> Future[T]:
        """Queue ``work`` to run inside the next transaction; the future resolves after commit."""
        if self._closed:
            raise RuntimeError("the SQLite writer is closed")
        future: Future[T] = Future()
        self._queue.put(_Job(work, future))
        return future

    def close(self) -> None:
        """Finish every job queued so far, then stop and close the connection."""
        self._closed = True
        self._queue.put(_Stop())
        self._thread.join()

    def _run(self) -> None:
        try:
            while True:
                batch, stop = self._take()
                if batch:
                    self._commit(batch)
                if stop:
                    return
        finally:
            self._conn.close()

    def _take(self) -> tuple[list[_Job], bool]:
        """Block for one job, then take whatever else is already waiting."""
        item = self._queue.get()
        batch: list[_Job] = []
        while not isinstance(item, _Stop):
            batch.append(item)
            if len(batch) == self._max_batch:
                return batch, False
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return batch, False
        return batch, True

    def _commit(self, batch: list[_Job]) -> None:
        outcomes: list[tuple[_Job, bool, Any]] = []
        enqueued = False
        try:
            self._conn.execute("BEGIN IMMEDIATE")
            for job in batch:
                if not job.future.set_running_or_notify_cancel():
                    continue  # the caller gave up before the job started
                ok, value = self._run_one(job.work)
                outcomes.append((job, ok, value))
                enqueued = enqueued or (ok and self._store.enqueued)
            self._conn.execute("COMMIT")
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
            return
        self.commits += 1
        # Announce first, so a caller that sees its answer also sees the outbox signal.
        self._on_commit(enqueued)
        for job, ok, value in outcomes:
            if ok:
                job.future.set_result(value)
            else:
                job.future.set_exception(value)

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
