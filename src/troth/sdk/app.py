"""``Troth``: the application object — registry, client, and worker in one.

With no ``url`` it is embedded: the engine runs in this process on a SQLite file (default
``./troth.db``), so a single process needs no server and keeps durability. With a ``url``
it is a client and worker of that server, receiving work for its ``group``; given several
URLs (servers sharing one PostgreSQL database), it moves on to the next when one fails.
Both modes run the same worker loop over the same ``Network`` seam.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import os
import sqlite3
from collections.abc import Callable, Coroutine, Sequence
from datetime import timedelta
from typing import (
    TYPE_CHECKING,
    Any,
    TypeVar,
    Unpack,
    cast,
    overload,
)

from troth.protocol.conventions import FUNC_TAG
from troth.protocol.kinds import Kind
from troth.protocol.queues import QUEUE_TAG
from troth.protocol.records import PromiseState, TaskState
from troth.protocol.requests import CreateAction, PromiseCreateRequest, TaskCreateRequest
from troth.sdk.cancellation import grace_tags
from troth.sdk.client import Executions, Handle, Promises, Schedules, Waiter
from troth.sdk.clock import Clock, WallClock
from troth.sdk.codec import DEFAULT_MAX_VALUE_BYTES, Codec, Encryptor, parameter_hints
from troth.sdk.errors import DEFAULT_HALT_ON, FunctionNotFoundError, ServerError
from troth.sdk.execution import Runtime, SettledCache
from troth.sdk.invocations import execution_deadline, invocation, root, same_work
from troth.sdk.leases import Leases
from troth.sdk.network import Network, action_head, anycast, new_pid, send_promise
from troth.sdk.observability import choose, measure
from troth.sdk.options import Options, StartOptions, as_flag, options
from troth.sdk.queues import Queue, RateLimit, declare, spec
from troth.sdk.registry import Registered, Registry, function_name
from troth.sdk.retry import RetryPolicy
from troth.sdk.signatures import ExecutionStart
from troth.sdk.stalls import LoopWatch, Stalls
from troth.sdk.tracing import UNTRACED
from troth.sdk.worker import Worker

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer
    from prometheus_client import CollectorRegistry

log = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")

DEFAULT_DB = "troth.db"


class Starts:
    """The ways to start an execution: ``run`` (here) and ``rpc`` (on a worker group). The
    app starts with default options; ``app.options(...)`` returns one with options.

    Everything after the function is the function's own arguments, untouched and typed by
    its signature; the handle's ``result()`` has the function's return type.
    """

    _app: Troth
    _opts: Options

    @property
    def run(self) -> ExecutionStart:
        """Start ``fn(*args, **kwargs)`` as execution ``id`` here, or join it if it exists.

        The execution starts in this process (``task.create`` hands it over already held);
        if it later suspends, any worker of this app's group may resume it.
        """
        return cast(ExecutionStart, functools.partial(self._app._run, self._opts))

    @property
    def rpc(self) -> ExecutionStart:
        """Start ``fn`` as execution ``id`` on any worker of the ``target`` option's group
        (default: this app's group), or join it if it exists."""
        return cast(ExecutionStart, functools.partial(self._app._rpc, self._opts))

    @property
    def schedules(self) -> Schedules:
        """Cron schedules of registered functions, made with these options."""
        return Schedules(self._app, self._opts)


class StartsWith(Starts):
    """``app.options(...)``: ``run`` and ``rpc`` with options."""

    def __init__(self, app: Troth, opts: Options) -> None:
        self._app = app
        self._opts = opts


class Troth(Starts):
    def __init__(
        self,
        url: str | Sequence[str] | None = None,
        group: str | None = None,
        db: str | None = None,
        *,
        pid: str | None = None,
        ttl: timedelta = timedelta(seconds=30),
        concurrency: int = 64,
        codec: Codec | None = None,
        encryptor: Encryptor | None = None,
        token: str | None = None,
        clock: Clock | None = None,
        retry_timeout: timedelta = timedelta(seconds=5),
        request_retry: timedelta = timedelta(seconds=30),
        shutdown_grace: timedelta = timedelta(seconds=10),
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
        default_timeout: timedelta | None = None,
        tracer: Tracer | None = None,
        metrics: CollectorRegistry | None = None,
        max_lease_losses: int | None = 3,
        halt_on: Sequence[type[BaseException]] = DEFAULT_HALT_ON,
    ) -> None:
        # Unset arguments come from the environment, as every example and ``troth worker``
        # set them: TROTH_URL (a server; else embedded), TROTH_GROUP, TROTH_DB, TROTH_TOKEN.
        # A database given here means embedded mode, whatever TROTH_URL says.
        env = os.environ
        if url is None and db is None:
            url = env.get("TROTH_URL") or None
        self.url = url
        self.group = group or env.get("TROTH_GROUP") or "default"
        self.db = db or env.get("TROTH_DB") or None
        self.pid = pid or new_pid()
        self.ttl_ms = round(ttl.total_seconds() * 1000)
        self.concurrency = concurrency
        # A step whose attempts lose the lease this many times in a row halts its task
        # (docs/reliability.md); None: it is retried as its policy allows, for ever.
        if max_lease_losses is not None and (
            isinstance(max_lease_losses, bool)
            or not isinstance(max_lease_losses, int)
            or max_lease_losses < 1
        ):
            raise ValueError(
                f"max_lease_losses must be a positive int or None, not {max_lease_losses!r}"
            )
        self.max_lease_losses = max_lease_losses
        # A durable function's own code raising one of these halts its task instead of
        # rejecting it, to be resumed once the code is fixed (docs/sdk.md, "Halted").
        self.halt_on = tuple(halt_on)
        if not all(isinstance(t, type) and issubclass(t, BaseException) for t in self.halt_on):
            raise TypeError(f"halt_on is a sequence of exception types, not {halt_on!r}")
        self.token = token if token is not None else env.get("TROTH_TOKEN")
        self.retry_timeout_ms = round(retry_timeout.total_seconds() * 1000)
        # Remote mode: how long a request that got no answer (or a 502/503/504) is retried
        # before the call fails with ``NetworkError`` (see ``troth.sdk.http``).
        self.request_retry_ms = round(request_retry.total_seconds() * 1000)
        self.clock: Clock = clock or WallClock()
        # Stopping lets running steps record their results for this long, then releases.
        self.shutdown_grace = shutdown_grace.total_seconds()
        # The deadline of executions started without one (none: they have no deadline).
        self.default_timeout = default_timeout
        # OpenTelemetry (docs/tracing.md): spans go to this tracer; without one, to the
        # global tracer provider's if one is configured when the runtime is made.
        self.tracer = tracer
        self._tracing = UNTRACED
        # Prometheus (docs/sdk.md#metrics): counted into this registry, if given.
        self.metrics = measure(metrics)
        self._app = self
        self._opts = Options()
        self.codec = codec or Codec(encryptor=encryptor, max_value_bytes=max_value_bytes)
        self.registry = Registry()
        self.waiter = Waiter(self)
        self.promises = Promises(self, self.waiter)
        self.executions = Executions(self)
        self.started = False
        self._runtime: Runtime | None = None
        self._worker: Worker | None = None
        self._watch: LoopWatch | None = None
        self._service: Any = None
        # Executions being created by ``run``/``rpc`` (and those whose creation failed and
        # no handle has reported yet), by id: ``stop`` waits for them and logs failures.
        self._starts: dict[asyncio.Future[Any], str] = {}
        self._queues: dict[str, Queue] = {}  # declared when the app starts

    # -- registration -------------------------------------------------------------------------

    @overload
    def register(self, fn: F) -> F: ...

    @overload
    def register(
        self,
        fn: None = None,
        *,
        name: str | None = None,
        version: int = 1,
        retry: RetryPolicy | None = None,
        timeout: timedelta | None = None,
        inline: bool = False,
    ) -> Callable[[F], F]: ...

    def register(
        self,
        fn: Callable[..., Any] | None = None,
        *,
        name: str | None = None,
        version: int = 1,
        retry: RetryPolicy | None = None,
        timeout: timedelta | None = None,
        inline: bool = False,
    ) -> Any:
        """Register ``fn`` under ``name`` (default: its ``__name__``, the name every process
        of the app finds it by, so two functions of that name in different modules need
        ``name=``) and ``version``. ``inline=True``: a plain ``def`` runs on the event loop
        when called as a step, unless the call's ``inline`` option says otherwise (see
        ``troth.sdk.options.Options``: it blocks the whole process while it runs)."""
        as_flag("inline", inline)

        def add(f: F) -> F:
            self.registry.add(
                f, name=name, version=version, retry=retry, timeout=timeout, inline=inline
            )
            return f

        return add(fn) if fn is not None else add

    def queue(
        self,
        name: str,
        *,
        concurrency: int | None = None,
        key_concurrency: int | None = None,
        rate: RateLimit | None = None,
        key_rate: RateLimit | None = None,
        priority: bool = False,
    ) -> Queue:
        """Declare queue ``name``: executions started through it run only when it has room
        (docs/queues.md). ``concurrency``: at most this many of the queue running at once
        (across every worker and server); ``key_concurrency``: the same per key; ``rate``:
        at most ``rate.limit`` starts per ``rate.period`` (``key_rate``: per key);
        ``priority``: a lower ``priority`` option starts first. Declared on the server when
        the app starts, for every process that uses the queue."""
        if self.started:
            raise RuntimeError(f"declare queue {name!r} before the app starts")
        queue = Queue(
            spec(name, concurrency, key_concurrency, rate, key_rate, priority), self.options
        )
        self._queues[name] = queue
        return queue

    # -- lifecycle ----------------------------------------------------------------------------

    @property
    def mode(self) -> str:
        """Where this app's executions live, in words: a server's URL(s), or a database file."""
        if self.url is not None:
            urls = self.url if isinstance(self.url, str) else ", ".join(self.url)
            return f"server {urls}"
        return f"embedded, database {os.path.abspath(self.db or DEFAULT_DB)}"

    @property
    def runtime(self) -> Runtime:
        if self._runtime is None:
            # Chosen first: the network sends the trace context with each request.
            self._tracing = choose(self.tracer)
            self._runtime = Runtime(
                self._make_network(),
                self.codec,
                self.registry,
                self.clock,
                SettledCache(),
                Leases(self.clock, ttl_ms=self.ttl_ms),
                default_timeout=self.default_timeout,
                tracing=self._tracing,
                metrics=self.metrics,
                max_lease_losses=self.max_lease_losses,
                halt_on=self.halt_on,
                stalls=Stalls(self.ttl_ms, lambda at, s: self.metrics.stalled(at.function, s)),
            )
        return self._runtime

    def _make_network(self) -> Network:
        if self.url is not None:
            from troth.sdk.http import HttpNetwork

            return HttpNetwork(
                self.url,
                self.group,
                self.pid,
                self.clock,
                token=self.token,
                request_retry_ms=self.request_retry_ms,
                trace_context=self._tracing.context if self._tracing.traced else None,
            )
        from troth.sdk.local import LocalNetwork
        from troth.storage.sqlite import SqliteService
        from troth.storage.sqlite.liveness import FileInUseError
        from troth.storage.sqlite.unopenable import why_unopenable

        path = self.db or DEFAULT_DB
        try:
            self._service = SqliteService(
                path, retry_timeout=self.retry_timeout_ms, owner="embedded"
            )
        except FileInUseError as e:
            raise ServerError("open", 500, f"cannot open the database {path!r}: {e}") from e
        except (sqlite3.Error, OSError) as e:
            why = why_unopenable(path, e)
            raise ServerError("open", 500, f"cannot open the database {path!r}: {why}") from e
        return LocalNetwork(self._service, self.clock, self.group, self.pid)

    async def start(self) -> None:
        """Start receiving and running work (and, embedded, the engine's background loops)."""
        if self.started:
            return
        runtime = self.runtime
        await declare(runtime.network, self._queues)
        self._worker = Worker(runtime, self.concurrency, self.waiter.notify)
        self._worker.start()
        self._watch = LoopWatch(runtime.stalls)
        self._watch.start()
        self.started = True
        await runtime.network.start(self._worker.on_message, self.waiter.relisten)

    async def stop(self) -> None:
        """Stop working; tasks still held are released so that they resume elsewhere.

        First every execution that ``run``/``rpc`` began to create is created (or has
        failed, which is logged as an error), even if no one awaited its handle."""
        await self._finish_starts()
        if self._worker is not None:
            await self._worker.stop(self.shutdown_grace)
            self._worker = None
        if self._watch is not None:
            self._watch.stop()
            self._watch = None
        if self._runtime is not None:
            await self._runtime.network.stop()
        if self._service is not None:
            await self._service.close()
            self._service = None
        self._runtime = None
        self.started = False

    async def __aenter__(self) -> Troth:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def worker(self) -> Worker:
        if self._worker is None:
            raise RuntimeError(
                "the app is not started: use `async with app:` or `await app.start()`"
            )
        return self._worker

    # -- starting executions ------------------------------------------------------------------

    def options(self, **given: Unpack[StartOptions]) -> StartsWith:
        """``run`` and ``rpc`` with these options (see ``troth.sdk.options.Options``):
        ``app.options(target="payments", timeout=3600).rpc("pay-7", charge, "acct")``."""
        return StartsWith(self, options(**given))

    async def cancel(
        self, id: str, reason: str | BaseException | None = None, *, detached: bool = False
    ) -> None:
        """Ask execution ``id`` to stop, cooperatively (``app.executions.cancel``): it
        observes ``CanceledError`` with ``reason``, may clean up, and its descendants are
        asked in turn. ``app.promises.cancel(id)`` ends it at once instead."""
        await self.executions.cancel(id, reason, detached=detached)

    def _run(
        self, opts: Options, id: str, fn: Callable[..., Any] | str, /, *args: Any, **kwargs: Any
    ) -> Handle[Any]:
        if QUEUE_TAG in opts.tags:
            # Its queue says when it runs: created for this process (preferably), then
            # offered when it has room, as an rpc is.
            target = opts.target or anycast(self.group, self.pid)
            return self._rpc(dataclasses.replace(opts, target=target), id, fn, *args, **kwargs)
        entry = self._entry(fn, opts.version)
        worker = self.worker
        # Refused here, not in the background: a grace without a deadline.
        grace_tags(opts, *execution_deadline(self, entry.fn, opts))
        started = self._start(id, self._create_run(worker, id, entry, args, kwargs, opts))
        return self._handle(id, entry.hints[1], started)

    def _rpc(
        self, opts: Options, id: str, fn: Callable[..., Any] | str, /, *args: Any, **kwargs: Any
    ) -> Handle[Any]:
        call = invocation(self, fn, args, kwargs, target=opts.target, version=opts.version)
        started = self._start(id, self._create(root(self, id, fn, opts, *call)))
        hint = None if isinstance(fn, str) else parameter_hints(fn)[1]
        return self._handle(id, hint, started)

    def _start(self, id: str, create: Coroutine[Any, Any, Any]) -> asyncio.Future[Any]:
        """Create execution ``id`` in the background, tracked until it exists (see ``stop``).

        ``run`` and ``rpc`` return before the create is sent, so that a caller may start
        many executions at once; ``await handle.started()`` waits for one."""
        start = asyncio.ensure_future(create)
        self._starts[start] = id
        start.add_done_callback(self._start_done)
        return start

    def _start_done(self, start: asyncio.Future[Any]) -> None:
        # A failure stays tracked until a handle raises it (``forget_start``) or ``stop``
        # logs it; retrieving it here keeps asyncio from reporting it a second time.
        if start.cancelled() or start.exception() is None:
            self._starts.pop(start, None)

    def forget_start(self, start: asyncio.Future[Any]) -> None:
        """A handle has raised this start's failure to its caller: ``stop`` need not log it."""
        self._starts.pop(start, None)

    async def _finish_starts(self) -> None:
        while pending := [start for start in self._starts if not start.done()]:
            await asyncio.wait(pending)
        for start, id in list(self._starts.items()):
            del self._starts[start]
            if not start.cancelled() and (error := start.exception()) is not None:
                log.error(
                    "execution %r was never created, and no one awaited its handle: %s",
                    id,
                    error,
                    exc_info=error,
                )

    def get(self, id: str, hint: Any = None) -> Handle[Any]:
        """A handle on an existing execution or promise."""
        return self._handle(id, hint)

    def _handle(
        self, id: str, hint: Any, started: asyncio.Future[Any] | None = None
    ) -> Handle[Any]:
        return Handle(
            id,
            hint,
            started,
            codec=self.codec,
            waiter=self.waiter,
            executions=self.executions,
            forget=self.forget_start,
        )

    def _entry(self, fn: Callable[..., Any] | str, version: int | None) -> Registered:
        if isinstance(fn, str):
            entry = self.registry.get(fn, version)
            if entry is None:
                raise FunctionNotFoundError(fn, version)
            return entry
        entry = self.registry.of(fn)
        if entry is None:
            raise FunctionNotFoundError(
                f"{function_name(fn)} (register it with @app.register so that any process "
                "can resume it)"
            )
        return entry

    async def _create_run(
        self,
        worker: Worker,
        id: str,
        entry: Registered,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        opts: Options,
    ) -> asyncio.Task[None] | None:
        """Create the execution; the job driving it here, if ``task.create`` handed it over.

        An execution that exists is joined if it runs the same function with the same
        arguments, else ``IdempotencyConflictError`` (see ``same_work``)."""
        # Preferably this process, which drives it at once if ``task.create`` hands it over.
        target = opts.target or anycast(self.group, self.pid)
        call = invocation(self, entry.name, args, kwargs, target, entry.version)
        create = root(self, id, entry.fn, opts, *call)
        with self.runtime.tracing.rpc("run", entry.name, create) as rpc:
            action = CreateAction(Kind.PROMISE_CREATE, action_head(), rpc.request)
            request = TaskCreateRequest(self.pid, self.ttl_ms, action)
            sent = self.clock.now()
            network = self.runtime.network
            status, body = await network.call(Kind.TASK_CREATE, request, (200, 409, 422))
            if status == 200:
                rpc.answered(body.promise)
        if status in (409, 422):
            # It exists, and someone else holds it or it is a plain promise: join it.
            same_work(id, (await self.promises.get(id)).record, create.tags)
            return None
        driving = None  # the 200's body is a TaskClaimResponse (Kind.TASK_CREATE.responses)
        if body.task is not None and body.task.state == TaskState.ACQUIRED:
            # Created, or an existing execution's pending task claimed: driven here either
            # way (it runs what its promise names), even if it is not the work asked for.
            driving = worker.spawn(worker.drive(body.task, body.promise, body.preload, sent))
        elif body.promise.state != PromiseState.PENDING:
            self.runtime.settled.add(body.promise)
        same_work(id, body.promise, create.tags)
        return driving

    async def _create(self, request: PromiseCreateRequest) -> None:
        """Create the execution, or join it if it exists with the same work (``same_work``)."""
        with self.runtime.tracing.rpc("rpc", request.tags[FUNC_TAG], request) as rpc:
            record = await send_promise(self.runtime.network, Kind.PROMISE_CREATE, rpc.request)
            rpc.answered(record)
        self.runtime.settled.add(record)
        same_work(request.id, record, request.tags)
