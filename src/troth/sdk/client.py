"""The caller's side: handles on executions, external promises, schedules.

Waiting for a result listens rather than polls: the app registers a listener
(``promise.register_listener`` to this process's unicast address) and the server sends an
``unblock`` when the promise settles. Unblocks are not redelivered if the stream was down,
so listeners are registered again on every reconnection and the promise is re-read on a
slow timer as a last resort. An app that is not started (no stream) polls instead.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from troth.protocol.records import PromiseRecord, PromiseState, Schedule, SettleState, Value
from troth.protocol.requests import (
    PromiseCreateRequest,
    PromiseGetRequest,
    PromiseRegisterListenerRequest,
    PromiseSettleRequest,
    ScheduleCreateRequest,
    ScheduleDeleteRequest,
    ScheduleGetRequest,
)
from troth.protocol.responses import PromiseResponse, ScheduleResponse
from troth.sdk.codec import Codec, error_to_json, result_of
from troth.sdk.errors import ServerError
from troth.sdk.network import Network, unicast
from troth.sdk.options import NO_DEADLINE, DeadlineSource, Options, deadline, deadline_tags

if TYPE_CHECKING:
    from troth.sdk.app import Troth

T = TypeVar("T")

# While listening, re-read a promise this often in case its unblock was lost (seconds).
LISTENING_RECHECK = 10.0
# Without a message stream, poll this often (seconds).
POLL_INTERVAL = 0.2


class Handle(Generic[T]):
    """An execution (or any promise) by id; ``await handle.result()`` for its outcome."""

    def __init__(
        self, app: Troth, id: str, hint: Any = None, started: asyncio.Future[Any] | None = None
    ) -> None:
        self._app = app
        self._hint = hint
        self._started = started
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
            self._app.forget_start(self._started)  # reported here: not lost
            raise

    async def result(self) -> T:
        """The function's value, or its error raised here."""
        record = await self.settled()
        return result_of(record, self._app.codec, self._hint)

    async def settled(self) -> PromiseRecord:
        """The settled promise record, once it is settled."""
        if self._started is not None:
            driving = await self._creation()
            if isinstance(driving, asyncio.Task):
                # Started and driven here: its fulfil lands in this process's cache, so
                # wait for the drive rather than register a listener (a write) first. If
                # the drive ends unsettled (suspended, released), listen as usual below.
                await asyncio.wait([driving])
        return await self._app.waiter.settled(self.id)

    async def done(self) -> bool:
        await self._creation()
        record = await self._app.waiter.lookup(self.id, listen=False)
        return record is not None

    def __repr__(self) -> str:
        return f"<Handle {self.id}>"


class Waiter:
    """Futures for promises this process waits on, settled by unblocks or by local fulfils."""

    def __init__(self, app: Troth) -> None:
        self._app = app
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
        runtime = self._app.runtime
        cached = runtime.settled.get(id)
        if cached is not None:
            return cached
        network = runtime.network
        if listen:
            address = unicast(network.group, network.pid)
            request: Any = PromiseRegisterListenerRequest(awaited=id, address=address)
            kind = "promise.register_listener"
        else:
            request, kind = PromiseGetRequest(id), "promise.get"
        status, body = await network.send(kind, request)
        if status != 200 or not isinstance(body, PromiseResponse):
            raise ServerError(kind, status, str(body))
        if body.promise.state == PromiseState.PENDING:
            return None
        runtime.settled.add(body.promise)
        return body.promise

    async def settled(self, id: str) -> PromiseRecord:
        future = asyncio.get_running_loop().create_future()
        self._futures.setdefault(id, []).append(future)
        listening = self._app.started
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

    def __init__(self, app: Troth) -> None:
        self._app = app

    @property
    def _network(self) -> Network:
        return self._app.runtime.network

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
        param = self._app.codec.encode(data) if data is not None else Value()
        at, _ = deadline(self._app.clock.now(), [(timeout, DeadlineSource.OPTION)])
        request = PromiseCreateRequest(id, at, param, dict(tags or {}))
        return await self._promise("promise.create", request)

    async def get(self, id: str) -> DurablePromise:
        return await self._promise("promise.get", PromiseGetRequest(id))

    async def resolve(self, id: str, value: Any = None) -> DurablePromise:
        return await self._settle(id, SettleState.RESOLVED, value)

    async def reject(self, id: str, error: Any = None) -> DurablePromise:
        if isinstance(error, BaseException):
            error = error_to_json(error)
        return await self._settle(id, SettleState.REJECTED, error)

    async def cancel(self, id: str, reason: Any = None) -> DurablePromise:
        return await self._settle(id, SettleState.REJECTED_CANCELED, reason)

    async def _settle(self, id: str, state: SettleState, value: Any) -> DurablePromise:
        encoded = self._app.codec.encode(value)
        return await self._promise("promise.settle", PromiseSettleRequest(id, state, encoded))

    async def _promise(self, kind: str, request: Any) -> DurablePromise:
        status, body = await self._network.send(kind, request)
        if status != 200 or not isinstance(body, PromiseResponse):
            raise ServerError(kind, status, str(body))
        self._app.waiter.notify(body.promise)
        return DurablePromise(body.promise, self._app.codec)


class Schedules:
    """Cron schedules that start an execution of a registered function at every fire.

    ``app.schedules`` makes them with default options, ``app.options(...).schedules`` with
    the options given (``timeout``: each fired execution's deadline; ``target``: the
    worker group that runs it; ``tags``)."""

    def __init__(self, app: Troth, opts: Options) -> None:
        self._app = app
        self._opts = opts

    async def create(
        self, id: str, cron: str, fn: Callable[..., Any] | str, /, *args: Any, **kwargs: Any
    ) -> Schedule:
        """Every fire creates promise ``<id>.<timestamp>`` running ``fn(*args, **kwargs)``."""
        opts = self._opts
        param, tags = self._app.invocation(fn, args, kwargs, target=opts.target)
        tags.update(opts.tags)
        at, source = self._app._deadline(fn, opts)
        tags.update(deadline_tags(source))
        now = self._app.clock.now()
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
        return await self._schedule("schedule.create", request)

    async def get(self, id: str) -> Schedule:
        return await self._schedule("schedule.get", ScheduleGetRequest(id))

    async def delete(self, id: str) -> None:
        status, body = await self._app.runtime.network.send(
            "schedule.delete", ScheduleDeleteRequest(id)
        )
        if status != 200:
            raise ServerError("schedule.delete", status, str(body))

    async def _schedule(self, kind: str, request: Any) -> Schedule:
        status, body = await self._app.runtime.network.send(kind, request)
        if status != 200 or not isinstance(body, ScheduleResponse):
            raise ServerError(kind, status, str(body))
        return body.schedule
