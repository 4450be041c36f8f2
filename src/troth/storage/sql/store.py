"""``SqlStore``: the engine's effects as SQL, written once for both SQL backends.

The store does not begin or end transactions; whoever holds the connection does. Every
statement touches rows by key or by an index prefix, so each effect costs O(rows it
affects). A backend's store is a subclass that names its dialect's ``Queries`` and how it
streams a search's rows; PostgreSQL's adds its object locks and a per-transaction cache
(``troth.storage.postgres.store``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Generator
from typing import Any, ClassVar, Generic, TypeVar

from troth.engine.store import Task, TaskTimeoutKind, Timeout, TimeoutKind, outbox_key, task_timeout
from troth.protocol.messages import Message
from troth.protocol.records import PromiseRecord, PromiseState, Schedule, TaskState
from troth.storage import codec
from troth.storage.sql.connection import Connection, Cursor
from troth.storage.sql.debounces import DebounceEffects
from troth.storage.sql.queries import Queries
from troth.storage.sql.queues import QueueEffects

C = TypeVar("C", bound=Connection)
T = TypeVar("T")

_NEVER = 2**63 - 1  # a deadline past every deadline (a signed 64-bit column's largest)


class SqlStore(QueueEffects[C], DebounceEffects[C], ABC, Generic[C]):
    """The ``troth.engine.Store`` effects on an open connection ``C``."""

    queries: ClassVar[Queries]

    def __init__(self, conn: C, retry_timeout: int) -> None:
        self.conn = conn
        self.retry_timeout = retry_timeout
        # Set when a message is enqueued, so the owner can wake the delivery loop.
        self.enqueued = False
        # The earliest deadline armed since the owner last cleared it, so the owner can
        # wake its timeouts loop only when a deadline comes earlier than the one it awaits.
        self.armed: int | None = None

    def _get(self, query: str, id: str, decode: Callable[[Any], T]) -> T | None:
        """The record keyed ``id``, or None."""
        row = self.conn.execute(query, (id,)).fetchone()
        return None if row is None else decode(row)

    # -- promises ---------------------------------------------------------------------------

    def get_promise(self, id: str) -> PromiseRecord | None:
        return self._get(self.queries.get_promise, id, codec.promise)

    def set_promise(self, promise: PromiseRecord) -> None:
        self.conn.execute(self.queries.set_promise, codec.promise_row(promise))

    def callbacks(self, id: str) -> list[str]:
        rows = self.conn.execute(self.queries.callbacks, (id,)).fetchall()
        return [awaiter for (awaiter,) in rows]

    def listeners(self, id: str) -> list[str]:
        rows = self.conn.execute(self.queries.listeners, (id,)).fetchall()
        return [address for (address,) in rows]

    def add_callback(self, awaited: str, awaiter: str) -> None:
        self.conn.execute(self.queries.add_callback, (awaited, awaiter, awaited))

    def add_listener(self, awaited: str, address: str) -> None:
        self.conn.execute(self.queries.add_listener, (awaited, address, awaited))

    def clear_registrations(self, id: str) -> None:
        self.conn.execute(self.queries.clear_callbacks, (id,))
        self.conn.execute(self.queries.clear_listeners, (id,))

    def scrub(self, settled: str) -> None:
        self.conn.execute(self.queries.scrub, (settled,))

    # -- tasks and schedules ----------------------------------------------------------------

    def get_task(self, id: str) -> Task | None:
        return self._get(self.queries.get_task, id, codec.task)

    def set_task(self, task: Task) -> None:
        self.conn.execute(self.queries.set_task, codec.task_row(task))

    def get_schedule(self, id: str) -> Schedule | None:
        return self._get(self.queries.get_schedule, id, codec.schedule)

    def set_schedule(self, schedule: Schedule) -> None:
        self.conn.execute(self.queries.set_schedule, codec.schedule_row(schedule))

    def del_schedule(self, id: str) -> None:
        self.conn.execute(self.queries.del_schedule, (id,))

    # -- timeouts ---------------------------------------------------------------------------

    def set_promise_timeout(self, id: str, at: int) -> None:
        self._arm(TimeoutKind.PROMISE, id, at)

    def set_task_timeout(self, id: str, kind: TaskTimeoutKind, at: int) -> None:
        self._arm(task_timeout(kind), id, at)

    def set_schedule_timeout(self, id: str, at: int) -> None:
        self._arm(TimeoutKind.SCHEDULE, id, at)

    def del_promise_timeout(self, id: str) -> None:
        self._disarm(TimeoutKind.PROMISE, id)

    def del_task_timeout(self, id: str) -> None:
        """Both of the task's timeouts (retry and lease), in one statement."""
        self.conn.execute(self.queries.del_task_timeouts, (id,))

    def del_schedule_timeout(self, id: str) -> None:
        self._disarm(TimeoutKind.SCHEDULE, id)

    def due(self, until: int, limit: int, *, deferring: bool = False) -> list[Timeout]:
        """Up to ``limit`` armed timeouts with deadline <= ``until``, in firing order; with
        ``deferring``, none of the retries deferred (``defer``)."""
        parts = 3 if deferring else 4
        args = (until, limit) * parts + (limit,)
        rows = self.conn.execute(self.queries.due[deferring], args).fetchall()
        return [Timeout(at, TimeoutKind(kind), id) for at, kind, id in rows]

    def next_timeout(self, *, deferring: bool = False) -> Timeout | None:
        heads = self.due(_NEVER, 1, deferring=deferring)
        return heads[0] if heads else None

    def is_armed(self, timeout: Timeout) -> bool:
        return self._armed_query(timeout).fetchone() is not None

    def disarm(self, timeout: Timeout) -> None:
        self._disarm(timeout.kind, timeout.id)

    def defer(self, timeout: Timeout) -> None:
        self.conn.execute(self.queries.defer, (timeout.id, timeout.at))

    def _arm(self, kind: TimeoutKind, id: str, at: int) -> None:
        queries = self.queries.timeouts[kind]
        self.conn.execute(queries.arm, (id, *queries.key, at))
        if self.armed is None or at < self.armed:
            self.armed = at

    def _disarm(self, kind: TimeoutKind, id: str) -> None:
        queries = self.queries.timeouts[kind]
        self.conn.execute(queries.disarm, (id, *queries.key))

    def _armed_query(self, timeout: Timeout) -> Cursor:
        """The query whether ``timeout`` is armed exactly so; one row if it is."""
        queries = self.queries.timeouts[timeout.kind]
        return self.conn.execute(queries.is_armed, (timeout.id, *queries.key, timeout.at))

    # -- outbox -----------------------------------------------------------------------------

    def set_message(self, address: str, message: Message) -> None:
        key = outbox_key(address, message)
        row = (codec.text(key), message.kind, address, codec.text(message))
        self.conn.execute(self.queries.set_message, row)
        self.enqueued = True

    def is_waiting(self, address: str, message: Message) -> bool:
        """Read under a shared row lock on PostgreSQL: an acknowledgement of the row waits
        for this transaction, so it cannot slip between this read and a ``defer`` that
        relies on it (and then find no deferred retry to fire)."""
        key = codec.text(outbox_key(address, message))
        row = self.conn.execute(self.queries.get_message, (key,)).fetchone()
        return row is not None and row[0] == address and codec.message(row[1]) == message

    # -- queries of the extensions ----------------------------------------------------------

    def search_promises(
        self, state: PromiseState | None, tags: dict[str, str], after: str | None, limit: int
    ) -> Generator[PromiseRecord, None, None]:
        query, args = self.queries.search_promises(state, tags, after, limit)
        return self._stream(query, args, codec.promise)

    def search_tasks(
        self, state: TaskState | None, after: str | None, limit: int
    ) -> Generator[Task, None, None]:
        query, args = self.queries.search_tasks(state, after, limit)
        return self._stream(query, args, codec.task)

    def search_schedules(
        self, tags: dict[str, str], after: str | None, limit: int
    ) -> Generator[Schedule, None, None]:
        query, args = self.queries.search_schedules(tags, after, limit)
        return self._stream(query, args, codec.schedule)

    def settled_in_branch(self, branch: str, excluding: str) -> list[PromiseRecord]:
        rows = self._rows(self.queries.settled_in_branch, (branch, excluding))
        return [codec.promise(row) for row in rows]

    @abstractmethod
    def _stream(
        self, query: str, args: tuple[object, ...], decode: Callable[[Any], T]
    ) -> Generator[T, None, None]:
        """The rows of a search, decoded, read as the caller takes them: a search's caller
        stops where its page is full, and the rows never taken should never be read."""

    def _rows(self, query: str, args: tuple[object, ...]) -> list[Any]:
        return self.conn.execute(query, args).fetchall()
