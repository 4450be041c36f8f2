"""The caller's side: handles on executions, external promises, schedules.

Waiting for a result listens rather than polls: the app registers a listener
(``promise.register_listener`` to this process's unicast address) and the server sends an
``unblock`` when the promise settles. The stream acknowledges what it handled, and troth's
server sends again an unblock whose stream died before acknowledging it, or that settled
while no stream was open. Against a server that does neither (the reference server drops
them), listeners are registered again on every reconnection and the promise is re-read on
a slow timer as a last resort. An app that is not started (no stream) polls instead.

A caller waiting on an execution also waits on the record of its next halt, so that a halt
wakes it like a settlement would and raises ``HaltedError`` (``troth.sdk.halts``).

These classes use their app only through a ``Session``: what they read of it, at each use.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Generic, Protocol, TypeVar, cast

from troth.protocol.conventions import cancel_request
from troth.protocol.kinds import Kind
from troth.protocol.queues import DEBOUNCED_HEADER, QUEUE_TAG, QueueGetRequest, QueueResponse
from troth.protocol.records import (
    PromiseRecord,
    PromiseState,
    Schedule,
    SettleState,
    TaskState,
    Value,
)
from troth.protocol.requests import (
    PromiseCreateRequest,
    PromiseGetRequest,
    PromiseRegisterListenerRequest,
    PromiseSettleRequest,
    ScheduleCreateRequest,
    ScheduleDeleteRequest,
    ScheduleGetRequest,
    TaskContinueRequest,
)
from troth.sdk.cancellation import reason_value
from troth.sdk.codec import Codec, error_to_json, result_of
from troth.sdk.errors import AlreadySettledError, HaltedError, ServerError
from troth.sdk.execution import Runtime
from troth.sdk.halts import halt_record, halt_records, halted_at
from troth.sdk.invocations import Starter, execution_deadline, invocation
from troth.sdk.network import Network, read_promise, send_promise, task_of, unicast
from troth.sdk.options import NO_DEADLINE, DeadlineSource, Options, deadline, deadline_tags
from troth.sdk.registry import function_name
from troth.views.executions import DEFAULT_LIMIT, Cursor, ExecutionQuery, Page

T = TypeVar("T")

# While listening, re-read a promise this often in case its unblock was lost (seconds).
LISTENING_RECHECK = 10.0
# Without a message stream, poll this often (seconds).
POLL_INTERVAL = 0.2
# A halt is recorded just before the task is halted: re-read the task this often meanwhile.
HALTING_RECHECK = 0.05


class Session(Starter, Protocol):
    """What the caller's side uses of its app (``troth.sdk.app.Troth`` is one), read at
    each use: the runtime is made on first use, and made again after a restart."""

    started: bool  # receiving messages: a waiter listens for unblocks rather than polls

    @property
    def runtime(self) -> Runtime: ...


class ExecutionStatus(StrEnum):
    """Where an execution stands (``handle.status()``, ``app.executions.status(id)``).

    Live: ``queued`` (waiting in its queue's line for a slot: ``status()`` answers a
    ``QueuedStatus`` then, which says where), ``pending`` (waiting for a worker, or a
    promise without a task), ``running`` (a worker holds it), ``suspended`` (awaiting a
    promise), ``halted`` (stopped until an operator resumes it; see ``HaltedError``).
    Settled: ``resolved``, ``rejected``, ``canceled``, ``timedout``.
    """

    QUEUED = "queued"
    PENDING = "pending"
    RUNNING = "running"
    SUSPENDED = "suspended"
    HALTED = "halted"
    RESOLVED = "resolved"
    REJECTED = "rejected"
    CANCELED = "canceled"
    TIMEDOUT = "timedout"


class QueuedStatus(str):
    """The status of an execution waiting in its queue (docs/queues.md, "Seeing queues"):
    equal to ``ExecutionStatus.QUEUED`` (``"queued"``), and says where it waits: its
    ``queue``, its ``key``, and its 1-based ``position`` in that key's line."""

    queue: str
    key: str
    position: int

    def __new__(cls, queue: str, key: str, position: int) -> QueuedStatus:
        status = super().__new__(cls, ExecutionStatus.QUEUED.value)
        status.queue, status.key, status.position = queue, key, position
        return status

    def __repr__(self) -> str:
        return f"QueuedStatus(queue={self.queue!r}, key={self.key!r}, position={self.position})"


_SETTLED_STATUS = {
    PromiseState.RESOLVED: ExecutionStatus.RESOLVED,
    PromiseState.REJECTED: ExecutionStatus.REJECTED,
    PromiseState.REJECTED_CANCELED: ExecutionStatus.CANCELED,
    PromiseState.REJECTED_TIMEDOUT: ExecutionStatus.TIMEDOUT,
}
_TASK_STATUS = {
    TaskState.PENDING: ExecutionStatus.PENDING,
    TaskState.ACQUIRED: ExecutionStatus.RUNNING,
    TaskState.SUSPENDED: ExecutionStatus.SUSPENDED,
    TaskState.HALTED: ExecutionStatus.HALTED,
}


class Handle(Generic[T]):
    """An execution (or any promise) by id; ``await handle.result()`` for its outcome."""

    def __init__(
        self,
        id: str,
        hint: Any = None,
        started: asyncio.Future[Any] | None = None,
        *,
        codec: Codec,
        waiter: Waiter,
        executions: Executions,
        forget: Callable[[asyncio.Future[Any]], None],
    ) -> None:
        self._hint = hint
        self._started = started
        self._codec = codec
        self._waiter = waiter
        self._executions = executions
        self._forget = forget  # told once this handle has raised its start's failure
        self.id = id

    async def started(self) -> None:
        """Return once the execution's root promise is durably created; raise why not.

        ``app.run``/``app.rpc`` create the execution in the background and return at once;
        it is created even if this is never awaited (``app.stop()`` waits for it). A handle
        from ``app.get`` creates nothing, so this returns at once."""
        await self._creation()

    async def _creation(self) -> Any:
        """The outcome of this handle's create: for ``run``, the job driving it here."""
        if self._started is None:
            return None
        try:
            # Shielded: a caller that stops waiting must not cancel the create itself.
            return await asyncio.shield(self._started)
        except asyncio.CancelledError:
            raise
        except BaseException:
            self._forget(self._started)  # reported here: not lost
            raise

    async def result(self) -> T:
        """The function's value, or its error raised here; ``HaltedError`` (with the reason)
        if the execution is halted, now or while waiting."""
        record = await self.settled()
        # The value was encoded from the function's T and is decoded back by its hint.
        return cast(T, result_of(record, self._codec, self._hint))

    async def status(self) -> ExecutionStatus | QueuedStatus:
        """Where the execution stands now (``queued``, ``pending``, ``running``, ...)."""
        await self._creation()
        return await self._executions.status(self.id)

    async def cancel(
        self, reason: str | BaseException | None = None, *, detached: bool = False
    ) -> None:
        """Ask the execution to stop, cooperatively (see ``Executions.cancel``); await
        ``result()`` for how it ended."""
        await self._creation()
        await self._executions.cancel(self.id, reason, detached=detached)

    async def settled(self) -> PromiseRecord:
        """The settled promise record, once it is settled (``HaltedError`` if halted)."""
        if self._started is not None:
            driving = await self._creation()
            if isinstance(driving, asyncio.Task):
                # Started and driven here: its fulfil lands in this process's cache, so
                # wait for the drive rather than register a listener (a write) first. If
                # the drive ends unsettled (suspended, released), listen as usual below.
                await asyncio.wait([driving])
        record = await self._waiter.execution(self.id)
        while (later := superseded_by(record)) is not None:
            record = await self._waiter.execution(later)  # a debounced start: its successor's
        return record

    async def done(self) -> bool:
        await self._creation()
        record = await self._waiter.lookup(self.id, listen=False)
        return record is not None

    def __repr__(self) -> str:
        return f"<Handle {self.id}>"


def superseded_by(record: PromiseRecord) -> str | None:
    """The start that superseded a debounced one (docs/queues.md, "Debounce"), if any."""
    headers = record.value.headers
    return headers.get(DEBOUNCED_HEADER) if headers else None


class Waiter:
    """Futures for promises this process waits on, settled by unblocks or by local fulfils."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self._futures: dict[str, list[asyncio.Future[PromiseRecord]]] = {}

    def notify(self, record: PromiseRecord) -> None:
        if record.state == PromiseState.PENDING:
            return
        for future in self._futures.pop(record.id, []):
            if not future.done():
                future.set_result(record)

    async def relisten(self) -> None:
        """Register every awaited promise's listener again (after a reconnection)."""
        for id in list(self._futures):
            with contextlib.suppress(Exception):
                record = await self.lookup(id, listen=True)
                if record is not None:
                    self.notify(record)

    async def lookup(self, id: str, listen: bool) -> PromiseRecord | None:
        """The promise if it is settled, else None (registering a listener if ``listen``)."""
        runtime = self._session.runtime
        cached = runtime.settled.get(id)
        if cached is not None:
            return cached
        network = runtime.network
        if listen:
            address = unicast(network.group, network.pid)
            request: Any = PromiseRegisterListenerRequest(awaited=id, address=address)
            kind = Kind.PROMISE_REGISTER_LISTENER
        else:
            request, kind = PromiseGetRequest(id), Kind.PROMISE_GET
        record = await send_promise(network, kind, request)
        if record.state == PromiseState.PENDING:
            return None
        runtime.settled.add(record)
        return record

    async def execution(self, id: str) -> PromiseRecord:
        """The settled promise of execution ``id``, once it is settled; ``HaltedError`` if
        its task is halted, now or while waiting (see the module docstring)."""
        while True:
            record = await self.lookup(id, listen=False)
            if record is not None:
                return record
            watch = await self._next_halt(id)
            if watch is None:
                return await self.settled(id)  # a promise without a task: nothing halts it
            if watch.state == PromiseState.PENDING:
                record = await self._first(id, watch.id)
                if record.id == id:
                    with contextlib.suppress(Exception):  # only tidiness
                        canceled = PromiseSettleRequest(
                            watch.id, SettleState.REJECTED_CANCELED, Value()
                        )
                        network = self._session.runtime.network
                        await send_promise(network, Kind.PROMISE_SETTLE, canceled)
                    return record
            # A halt was recorded (or the record's deadline passed): look again.

    async def _next_halt(self, id: str) -> PromiseRecord | None:
        """The record that the next halt of execution ``id`` will settle, created if absent;
        None if ``id`` has no task. Raises ``HaltedError`` if the task is halted now."""
        network = self._session.runtime.network
        while True:
            task = await task_of(network, id)
            if task is None:
                return None
            records = await halt_records(self._read, id)
            halt = halted_at(records[-1], self._session.codec) if records else None
            version, reason = halt or (None, None)
            # The task was read before the last halt (versions only rise), or the run that
            # recorded it is halting the task now: read it again.
            stale = version is not None and version > task.version
            halting = task.state == TaskState.ACQUIRED and version == task.version
            if not (stale or halting):
                break
            await asyncio.sleep(HALTING_RECHECK)
        if task.state == TaskState.HALTED:
            raise HaltedError(id, reason if version == task.version else None)
        root = await self._read(id)
        if root is None or root.state != PromiseState.PENDING:
            return root
        create = halt_record(root, len(records) + 1)
        return await send_promise(network, Kind.PROMISE_CREATE, create)

    async def _first(self, *ids: str) -> PromiseRecord:
        """The first of these promises to settle (the earliest given if several have)."""
        waits = [asyncio.ensure_future(self.settled(id)) for id in ids]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            return next(wait for wait in waits if wait.done()).result()
        finally:
            for wait in waits:
                wait.cancel()
            await asyncio.wait(waits)
            for wait in waits:
                if not wait.cancelled():
                    wait.exception()  # retrieved: the first one's failure is raised above

    async def _read(self, id: str) -> PromiseRecord | None:
        return await read_promise(self._session.runtime.network, id)

    async def settled(self, id: str) -> PromiseRecord:
        future = asyncio.get_running_loop().create_future()
        self._futures.setdefault(id, []).append(future)
        listening = self._session.started
        try:
            while True:
                record = await self.lookup(id, listen=listening)
                if record is not None:
                    return record
                interval = LISTENING_RECHECK if listening else POLL_INTERVAL
                with contextlib.suppress(TimeoutError):
                    return await asyncio.wait_for(asyncio.shield(future), interval)
        finally:
            waiting = self._futures.get(id)
            if waiting and future in waiting:
                waiting.remove(future)
                if not waiting:
                    del self._futures[id]


@dataclass(frozen=True)
class DurablePromise:
    """A promise as the server last reported it."""

    record: PromiseRecord
    codec: Codec

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def state(self) -> PromiseState:
        return self.record.state

    @property
    def pending(self) -> bool:
        return self.record.state == PromiseState.PENDING

    @property
    def tags(self) -> dict[str, str]:
        return self.record.tags

    def param(self) -> Any:
        return self.codec.decode(self.record.param)

    def value(self, hint: Any = None) -> Any:
        """The resolved value, or the rejection raised as an exception."""
        return result_of(self.record, self.codec, hint)


class Promises:
    """Promises settled from outside any execution (human approval, webhooks, ...)."""

    def __init__(self, session: Session, waiter: Waiter) -> None:
        self._session = session
        self._waiter = waiter

    @property
    def _network(self) -> Network:
        return self._session.runtime.network

    async def create(
        self,
        id: str,
        *,
        timeout: timedelta | float,
        data: Any = None,
        tags: dict[str, str] | None = None,
    ) -> DurablePromise:
        if not isinstance(timeout, timedelta):
            timeout = timedelta(seconds=timeout)
        param = self._session.codec.encode(data) if data is not None else Value()
        at, _ = deadline(self._session.clock.now(), [(timeout, DeadlineSource.OPTION)])
        request = PromiseCreateRequest(id, at, param, dict(tags or {}))
        return await self._promise(Kind.PROMISE_CREATE, request)

    async def get(self, id: str) -> DurablePromise:
        return await self._promise(Kind.PROMISE_GET, PromiseGetRequest(id))

    async def resolve(self, id: str, value: Any = None) -> DurablePromise:
        return await self._settle(id, SettleState.RESOLVED, value)

    async def reject(self, id: str, error: Any = None) -> DurablePromise:
        if isinstance(error, BaseException):
            error = error_to_json(error)
        return await self._settle(id, SettleState.REJECTED, error)

    async def cancel(self, id: str, reason: Any = None) -> DurablePromise:
        return await self._settle(id, SettleState.REJECTED_CANCELED, reason)

    async def _settle(self, id: str, state: SettleState, value: Any) -> DurablePromise:
        """Settle ``id``, or raise ``AlreadySettledError`` if it was settled otherwise."""
        codec = self._session.codec
        encoded = codec.encode(value)
        promise = await self._promise(Kind.PROMISE_SETTLE, PromiseSettleRequest(id, state, encoded))
        record = promise.record
        if record.state != PromiseState(state) or not (
            record.value == encoded or _holds(codec, record, value)
        ):
            raise AlreadySettledError(id, record.state, state)
        return promise

    async def _promise(self, kind: Kind, request: Any) -> DurablePromise:
        record = await send_promise(self._network, kind, request)
        self._waiter.notify(record)
        return DurablePromise(record, self._session.codec)


def _holds(codec: Codec, record: PromiseRecord, value: Any) -> bool:
    """Whether the settled ``record`` holds ``value`` (an encrypted value is written anew
    each time, so the encodings may differ where the values do not)."""
    try:
        return bool(codec.decode(record.value) == value)
    except Exception:
        return False


def _ms(instant: datetime | None) -> str | None:
    if instant is None:
        return None
    if instant.tzinfo is None:
        raise ValueError(f"give an aware datetime (with its time zone), not {instant!r}")
    return str(round(instant.timestamp() * 1000))


async def _queued(network: Network, queue: str, id: str) -> QueuedStatus | None:
    """Where task ``id`` waits in ``queue``; None once it is admitted (offered to a worker),
    or when the server keeps no queues."""
    status, body = await network.send(Kind.QUEUE_GET, QueueGetRequest(queue, task=id))
    if status != 200 or not isinstance(body, QueueResponse) or body.entry is None:
        return None
    entry = body.entry
    if entry.admitted or entry.position is None:
        return None
    return QueuedStatus(queue, entry.key, entry.position)


class Executions:
    """Executions by id, for operators: where one stands, and resuming a halted one."""

    def __init__(self, session: Session) -> None:
        self._session = session

    async def list(
        self,
        *,
        state: str | None = None,
        function: str | Callable[..., Any] | None = None,
        tag: tuple[str, str] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = DEFAULT_LIMIT,
        cursor: Cursor | None = None,
    ) -> Page:
        """A page of executions, newest first, as ``troth executions list`` and the console
        list them: every filter given must hold (``state``: a promise state or ``halted``;
        ``function``: a registered function or its name; ``tag``: ``(key, value)``;
        ``since``/``until``: the creation instant, ``since`` included). ``page.next`` is the
        cursor of the next page (None on the last)::

            page = await app.executions.list(state="rejected", limit=20)
            while page.next is not None:
                page = await app.executions.list(state="rejected", cursor=page.next)
        """
        if function is not None and not isinstance(function, str):
            entry = self._session.registry.of(function)
            function = entry.name if entry is not None else function_name(function)
        params = {
            "state": state,
            "function": function,
            "tag": f"{tag[0]}:{tag[1]}" if tag is not None else None,
            "since": _ms(since),
            "until": _ms(until),
            "limit": str(limit),
            "cursor": str(cursor) if cursor is not None else None,
        }
        # A bad filter is a ValueError naming it (``QueryError``), before anything is sent.
        query = ExecutionQuery.parse({k: v for k, v in params.items() if v is not None})
        return await self._session.runtime.network.executions(query)

    async def status(self, id: str) -> ExecutionStatus | QueuedStatus:
        """Where execution ``id`` stands now: its promise's state once settled, else its
        task's (``pending`` for a promise without a task), or ``queued`` while its task
        waits in its queue's line."""
        network = self._session.runtime.network
        promise = await send_promise(network, Kind.PROMISE_GET, PromiseGetRequest(id))
        if promise.state == PromiseState.PENDING:
            task = await task_of(network, id)
            if task is None:
                return ExecutionStatus.PENDING
            if task.state == TaskState.PENDING and QUEUE_TAG in promise.tags:
                queued = await _queued(network, promise.tags[QUEUE_TAG], id)
                if queued is not None:
                    return queued
            if task.state != TaskState.FULFILLED:
                return _TASK_STATUS[task.state]
            # Settled between the two reads.
            promise = await send_promise(network, Kind.PROMISE_GET, PromiseGetRequest(id))
        return _SETTLED_STATUS.get(promise.state, ExecutionStatus.PENDING)

    async def cancel(
        self, id: str, reason: str | BaseException | None = None, *, detached: bool = False
    ) -> None:
        """Ask execution ``id`` to stop (see ``troth.sdk.cancellation``): it observes
        ``CanceledError`` (with ``reason``) at its current durable call or its next one,
        may clean up inside ``ctx.shield()``, and ends canceled unless it returns normally;
        its live non-detached descendants are asked in turn (``detached=True``: those too).

        Returns once the request is recorded, not when the execution has stopped (await
        its handle's ``result()`` for that). An execution that has ended is left as it is.
        ``ServerError`` (404) if there is no such execution (or ``id`` is a plain promise,
        which ``app.promises`` settles). To end an execution at once,
        without its cleanup or its children, settle its promise instead
        (``app.promises.cancel(id)``)."""
        network = self._session.runtime.network
        root = await read_promise(network, id)
        if root is None:
            raise ServerError(Kind.PROMISE_GET, 404, f"no execution {id!r}")
        if root.state != PromiseState.PENDING:
            return
        if await task_of(network, id) is None:
            raise ServerError(
                Kind.TASK_GET, 404, f"{id!r} is a promise without a task, not an execution"
            )
        request = cancel_request(root)
        record = await send_promise(network, Kind.PROMISE_CREATE, request)
        if record.state == PromiseState.PENDING:
            value = reason_value(self._session.codec, reason, detached)
            settle = PromiseSettleRequest(request.id, SettleState.RESOLVED, value)
            await send_promise(network, Kind.PROMISE_SETTLE, settle)

    async def resume(self, id: str) -> None:
        """Resume a halted execution (``task.continue``): a worker picks it up and replays
        it, so deploy code that matches its history first, or it halts again (its callers
        then get a ``HaltedError`` with the new reason). ``ServerError`` (409) if it is not
        halted, (404) if there is no such execution."""
        network = self._session.runtime.network
        status, _ = await network.call(Kind.TASK_CONTINUE, TaskContinueRequest(id), (200, 409))
        if status == 409:
            raise ServerError(Kind.TASK_CONTINUE, status, f"execution {id!r} is not halted")


class Schedules:
    """Cron schedules that start an execution of a registered function at every fire.

    ``app.schedules`` makes them with default options, ``app.options(...).schedules`` with
    the options given (``timeout``: each fired execution's deadline; ``target``: the
    worker group that runs it; ``tags``)."""

    def __init__(self, session: Session, opts: Options) -> None:
        self._session = session
        self._opts = opts

    async def create(
        self, id: str, cron: str, fn: Callable[..., Any] | str, /, *args: Any, **kwargs: Any
    ) -> Schedule:
        """Every fire creates promise ``<id>.<timestamp>`` running ``fn(*args, **kwargs)``."""
        opts, session = self._opts, self._session
        param, tags = invocation(session, fn, args, kwargs, target=opts.target)
        tags.update(opts.tags)
        at, source = execution_deadline(session, fn, opts)
        tags.update(deadline_tags(source))
        now = session.clock.now()
        # A duration from each fire; "no deadline" as the longest one that cannot overflow.
        timeout = at - now if source is not None else NO_DEADLINE // 2
        request = ScheduleCreateRequest(
            id=id,
            cron=cron,
            promise_id="{{.id}}.{{.timestamp}}",
            promise_timeout=max(1, timeout),
            promise_param=param,
            promise_tags=tags,
        )
        return await self._schedule(Kind.SCHEDULE_CREATE, request)

    async def get(self, id: str) -> Schedule:
        return await self._schedule(Kind.SCHEDULE_GET, ScheduleGetRequest(id))

    async def delete(self, id: str) -> None:
        await self._session.runtime.network.call(Kind.SCHEDULE_DELETE, ScheduleDeleteRequest(id))

    async def _schedule(self, kind: Kind, request: Any) -> Schedule:
        _, body = await self._session.runtime.network.call(kind, request)
        schedule: Schedule = body.schedule  # a ScheduleResponse
        return schedule
