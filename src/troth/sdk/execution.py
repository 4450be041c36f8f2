"""One run of a durable function over the task that holds it, from the top until it blocks.

Replay is re-execution: the function runs again from its first line after every resume,
and each durable call finds its own past by its id (the parent's id extended by ``n``, the
n-th call the parent made: ``root:0``, ``root:0.3``; see ``troth.protocol.ids``). A call
whose promise is settled answers from the record at once (from the preload the server
sent, from this worker's cache of settled promises, or from the one ``promise.create``
that would have created it); a local step whose promise is pending runs; a remote call
whose promise is pending raises ``Suspended`` into the function, which unwinds it. When
the function has unwound, every durable operation still in flight is allowed to finish
(so concurrent local steps record their results), and the run reports the promises it
blocked on; the worker suspends the task on all of them in one request.

Every child create and settle is a ``task.fence`` at the task's version (sent in batches
through troth's ``task.fences`` where the server has it: ``Network.fences``), so a worker
that lost its lease cannot write: the fence answers 409 and the run stops driving the task. A
run that may have lost its lease starts no step either (``Execution.lost``, by the lease
rule of ``troth.sdk.leases``).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections import OrderedDict
from collections.abc import Coroutine
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, NamedTuple, NoReturn

from troth.protocol.conventions import CANCEL_AT_TAG, cancel_id, cancel_request
from troth.protocol.kinds import Kind
from troth.protocol.records import PromiseRecord, PromiseState, SettleState, Value
from troth.protocol.requests import (
    FenceAction,
    PromiseCreateRequest,
    PromiseGetRequest,
    PromiseRegisterListenerRequest,
    PromiseSettleRequest,
)
from troth.protocol.responses import TaskFenceResult
from troth.sdk.cancellation import WATCH_DELAY, Cancellation, received
from troth.sdk.clock import Clock
from troth.sdk.codec import Codec
from troth.sdk.errors import (
    DEFAULT_HALT_ON,
    Aborted,
    CanceledError,
    CodeError,
    ExecutionSignal,
    LeaseLost,
    NetworkError,
    NonDeterminismError,
    ServerError,
    Stopping,
    Suspended,
    UnstorableValueError,
    recorded,
)
from troth.sdk.known import Known
from troth.sdk.leases import HeldTask, Leases
from troth.sdk.metrics import UNMEASURED, Metrics
from troth.sdk.network import Network, action_head, unicast
from troth.sdk.registry import Registry
from troth.sdk.replay import Call
from troth.sdk.stalls import Stalls
from troth.sdk.tracing import UNTRACED, Tracing

log = logging.getLogger(__name__)

RUN_TAG = "troth:run"
"""On a local step: the run (process and task version) that created it, so that a later
run knows the step was started before it (see ``troth.sdk.attempts``)."""


class SettledCache:
    """Settled promises this worker has seen, by id; a settled promise never changes, so a
    hit is always true, and a resumed execution replays without re-reading its history."""

    def __init__(self, capacity: int = 50_000) -> None:
        self._records: OrderedDict[str, PromiseRecord] = OrderedDict()
        self._capacity = capacity

    def get(self, id: str) -> PromiseRecord | None:
        record = self._records.get(id)
        if record is not None:
            self._records.move_to_end(id)
        return record

    def add(self, record: PromiseRecord) -> None:
        if record.state == PromiseState.PENDING:
            return
        self._records[record.id] = record
        self._records.move_to_end(record.id)
        if len(self._records) > self._capacity:
            self._records.popitem(last=False)


@dataclass
class Runtime:
    """What every execution of one app shares."""

    network: Network
    codec: Codec
    registry: Registry
    clock: Clock
    settled: SettledCache
    leases: Leases  # the tasks this process holds (see ``Execution.lost``)
    active_steps: int = 0  # plain functions running now (virtual time waits for them)
    # ``Troth(max_lease_losses=...)``: a step's interrupted attempts in a row that halt its
    # task (``troth.sdk.attempts``); None: no bound.
    max_lease_losses: int | None = 3
    # ``Troth(halt_on=...)``: errors that halt an execution when its own code raises them.
    halt_on: tuple[type[BaseException], ...] = DEFAULT_HALT_ON
    # Code that blocks the event loop, timed and reported (``troth.sdk.stalls``).
    stalls: Stalls = field(default_factory=lambda: Stalls(30_000))
    # ``Troth(default_timeout=...)``: the deadline of executions started without one.
    default_timeout: timedelta | None = None
    # Spans of runs, steps and rpcs (``troth.sdk.tracing``), chosen once per app.
    tracing: Tracing = UNTRACED
    # Counts of runs and steps (``troth.sdk.metrics``), opt-in: ``Troth(metrics=...)``.
    metrics: Metrics = UNMEASURED
    # Set when the worker stops: no durable call starts and every wait ends (see
    # ``Execution.refuse`` and ``Execution.pause``).
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    # Runs listening for their cancellation, by cancel promise id (see ``Execution.watch``).
    watching: dict[str, Execution] = field(default_factory=dict)


class Done(NamedTuple):
    value: Any


class Failed(NamedTuple):
    error: BaseException


class Suspend(NamedTuple):
    awaited: list[str]


class Abort(NamedTuple):
    signal: ExecutionSignal


class Rerun(NamedTuple):
    """Canceled while it ran, and then blocked: replay at once, knowing it from the start."""


Outcome = Done | Failed | Suspend | Abort | Rerun

# Set inside the task that runs a local step, so that a step may keep issuing durable
# calls while its execution drains (see ``Execution.spawn``).
_in_step: contextvars.ContextVar[bool] = contextvars.ContextVar("troth_in_step", default=False)


class Execution:
    def __init__(
        self,
        runtime: Runtime,
        task: HeldTask,
        root: PromiseRecord,
        preload: list[PromiseRecord],
        known: Known,
    ) -> None:
        self.runtime = runtime
        self.task = task
        self.root = root
        # What exists of the branch, shared by every run of this hold (``troth.sdk.known``).
        self.known = known
        self.awaited: set[str] = set()
        self.inflight: set[asyncio.Task[Any]] = set()
        self.draining = False
        self.signal: ExecutionSignal | None = None
        self.learn(preload)
        # Cancellation (``troth.sdk.cancellation``): the cancel promise as last seen (None
        # while not known to exist), what it holds, and the remote children made in this
        # run (id -> record, detached, shielded), to be asked to stop in turn.
        self.cancel_id = cancel_id(root.id)
        found = [r for r in preload if r.id == self.cancel_id]
        self.cancel_record = found[0] if found else runtime.settled.get(self.cancel_id)
        self.cancellation: Cancellation | None = received(self.cancel_record, root, runtime.codec)
        self.canceled_at_start = self.cancellation is not None
        self.cancel_event = asyncio.Event()
        if self.cancellation is not None:
            self.cancel_event.set()
        self.remote: dict[str, tuple[PromiseRecord, bool, bool]] = {}
        self._asked: set[str] = set()

    # -- the history ------------------------------------------------------------------------

    def learn(self, records: list[PromiseRecord]) -> None:
        for record in records:
            self.runtime.settled.add(record)
            self.known.saw(record.id)

    def recorded(self, id: str) -> PromiseRecord | None:
        return self.runtime.settled.get(id)

    @property
    def run_id(self) -> str:
        """This run among all runs of the task: the process and the task version."""
        return f"{self.runtime.network.pid}/{self.task.version}"

    def check(self, record: PromiseRecord, call: Call) -> None:
        """Refuse to replay a call against a record that another call made."""
        reason = call.mismatch(record.tags)
        if reason is not None:
            self.refuse_history(record.id, reason)

    def refuse_history(self, id: str, reason: str) -> None:
        error = NonDeterminismError(self.root.id, id, reason)
        self.stop(error)
        raise error

    async def read(self, id: str) -> PromiseRecord | None:
        """The promise ``id`` as the server has it, or None if it does not exist."""
        request = PromiseGetRequest(id)
        try:
            status, body = await self.runtime.network.call(Kind.PROMISE_GET, request, (200, 404))
        except NetworkError as e:
            signal = Aborted(f"server unreachable: {e}")
            self.stop(signal)
            raise signal from e
        except ServerError as e:
            signal = Aborted(str(e))
            self.stop(signal)
            raise signal from e
        if status == 404:
            return None
        record: PromiseRecord = body.promise  # a 200 to promise.get carries a PromiseResponse
        self.learn([record])
        return record

    # -- lifecycle ----------------------------------------------------------------------------

    def stop(self, signal: ExecutionSignal) -> None:
        """Record why this run cannot go on; every later durable call raises at once."""
        if self.signal is None:
            self.signal = signal

    def lost(self) -> LeaseLost | None:
        """Stop, and say why, unless this run certainly still holds its task: a step must
        not start otherwise (``troth.sdk.leases``)."""
        why = self.runtime.leases.lost(self.task)
        if why is None:
            return None
        signal = LeaseLost(f"the lease of task {self.task.id!r} v{self.task.version} {why}")
        self.stop(signal)
        return signal

    def block_on(self, id: str) -> None:
        self.awaited.add(id)

    def refuse(self) -> ExecutionSignal | None:
        """The signal a new durable call must raise instead of starting, if any."""
        if self.signal is None and self.runtime.stopping.is_set():
            self.stop(Stopping("the worker is stopping"))
        if self.signal is not None:
            return self.signal
        if self.draining and not _in_step.get():
            return Suspended()
        return None

    async def pause(self, seconds: float, cancelable: bool = False) -> bool:
        """Wait before a retry; a stopping worker ends the wait (the retry is recorded, so
        the run that takes the task over waits out the rest), and so does a cancellation
        if ``cancelable`` (True is returned then)."""
        stopping = self.runtime.stopping
        canceled = cancelable and self.cancel_event.is_set()
        if not stopping.is_set() and not canceled:
            waits = [self.runtime.clock.sleep(seconds), stopping.wait()]
            if cancelable:
                waits.append(self.cancel_event.wait())
            futures = [asyncio.ensure_future(w) for w in waits]
            try:
                await asyncio.wait(futures, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for future in futures:
                    future.cancel()
        if stopping.is_set():
            signal = Stopping("the worker is stopping")
            self.stop(signal)
            raise signal
        return cancelable and self.cancel_event.is_set()

    # -- cancellation ---------------------------------------------------------------------

    def canceled(self, shielded: bool) -> CanceledError | None:
        """The error a durable call raises now: this execution was canceled, and the call
        is not made inside ``ctx.shield()``."""
        cancellation = self.cancellation
        return cancellation.error if cancellation is not None and not shielded else None

    def on_cancel(self, record: PromiseRecord) -> None:
        """The cancel promise as just seen; if it holds a cancellation, receive it."""
        self.cancel_record = record
        if self.cancellation is not None:
            return
        self.cancellation = received(record, self.root, self.runtime.codec)
        if self.cancellation is not None:
            self.cancel_event.set()
            for child, detached, shielded in list(self.remote.values()):
                self._ask(child, detached, shielded)

    def track_remote(self, child: PromiseRecord, detached: bool, shielded: bool) -> None:
        """A remote child of this run, pending: ask it to stop once this execution is
        canceled (at once if it is), unless it was made in a shield or is detached."""
        self.remote[child.id] = (child, detached, shielded)
        self._ask(child, detached, shielded)

    def _ask(self, child: PromiseRecord, detached: bool, shielded: bool) -> None:
        cancellation = self.cancellation
        if cancellation is None or shielded or (detached and not cancellation.detached):
            return
        if child.id in self._asked or child.state != PromiseState.PENDING:
            return
        self._asked.add(child.id)
        self.spawn(self._ask_child(child, cancellation.value))

    async def _ask_child(self, child: PromiseRecord, value: Value) -> None:
        request = cancel_request(child)
        record = await self.create(request)
        if record.state == PromiseState.PENDING:
            await self.settle(request.id, SettleState.RESOLVED, value)

    async def cancel_promise(self) -> PromiseRecord:
        """This execution's cancel promise, created (pending) if it is not known to exist."""
        if self.cancel_record is None:
            self.on_cancel(await self.create(cancel_request(self.root)))
        assert self.cancel_record is not None
        return self.cancel_record

    async def watch(self) -> None:
        """Listen for this execution's cancellation while the run goes on: this process
        is sent an unblock when it comes (``Worker.on_message`` hands it to ``on_cancel``)."""
        if self.cancellation is not None:
            return
        await self.runtime.clock.sleep(WATCH_DELAY)
        await self.cancel_promise()
        network = self.runtime.network
        self.runtime.watching[self.cancel_id] = self
        listen = PromiseRegisterListenerRequest(
            awaited=self.cancel_id, address=unicast(network.group, network.pid)
        )
        status, body = await network.send(Kind.PROMISE_REGISTER_LISTENER, listen)
        if status == 200:
            self.runtime.settled.add(body.promise)  # a rerun knows it from the start
            self.on_cancel(body.promise)

    def spawn(self, work: Coroutine[Any, Any, Any], step: bool = False) -> asyncio.Task[Any]:
        """Start a durable operation now, tracked so that the run waits for it to finish."""
        if step:
            context = contextvars.copy_context()
            context.run(_in_step.set, True)
            task = asyncio.get_running_loop().create_task(work, context=context)
        else:
            task = asyncio.ensure_future(work)
        self.inflight.add(task)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self.inflight.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved here: an unawaited failure is reported by its awaiter

    async def drain(self) -> None:
        self.draining = True
        while self.inflight:
            await asyncio.wait(list(self.inflight))

    # -- fenced writes ----------------------------------------------------------------------

    async def fence(self, action: FenceAction) -> PromiseRecord:
        """Run ``action`` only while this run still holds the task at its version."""
        return (await self.fences([action]))[0]

    async def fences(self, actions: list[FenceAction]) -> list[PromiseRecord]:
        """Run ``actions`` in order, only while this run still holds the task at its
        version (one request and one commit where the server has ``task.fences``): the
        promise each one answered with."""
        network = self.runtime.network
        try:
            status, body = await network.fences(self.task.id, self.task.version, actions)
        except NetworkError as e:
            signal = Aborted(f"server unreachable: {e}")
            self.stop(signal)
            raise signal from e
        if status != 200:
            # Refused whole; the last action is the one a value makes too large (a step's
            # settle), named as the standard requests would have named it.
            self._refused(actions[-1], status, body, Kind.TASK_FENCES)
        records = []
        for action, (fenced, answer) in zip(actions, body.fences, strict=True):
            if fenced != 200:
                self._refused(action, fenced, answer, Kind.TASK_FENCE)
            result: TaskFenceResult = answer
            if result.inner.status != 200:
                raise ServerError(action.kind, result.inner.status, "refused inside task.fence")
            record: PromiseRecord = result.inner.body.promise  # a PromiseResponse
            self.learn([*result.preload, record])
            records.append(record)
        return records

    def _refused(self, action: FenceAction, status: int, body: object, kind: Kind) -> NoReturn:
        """Raise what a fence refused with ``status`` means for this run."""
        if status in (404, 409):
            lost = LeaseLost(
                f"task {self.task.id!r} is no longer held at version {self.task.version}"
            )
            self.stop(lost)
            raise lost
        if status == 413:
            # The same request is refused the same way every time: the call fails.
            raise UnstorableValueError(
                f"the server refused {action.kind} of {action.data.id!r} as too large "
                f"(413: {body}); lower Troth(max_value_bytes=...) below the server's limit"
            )
        if status >= 500:
            signal = Aborted(str(ServerError(kind, status, str(body))))
            self.stop(signal)
            raise signal
        # The server refused this call (a 400 names the mistake): the call fails, as it
        # would on every replay; the function may handle it like any error.
        raise ServerError(f"{kind} {action.kind}", status, str(body))

    async def create(self, request: PromiseCreateRequest) -> PromiseRecord:
        return await self.fence(FenceAction(Kind.PROMISE_CREATE, request, action_head()))

    async def settle(self, id: str, state: SettleState, value: Value) -> PromiseRecord:
        request = PromiseSettleRequest(id, state, value)
        return await self.fence(FenceAction(Kind.PROMISE_SETTLE, request, action_head()))

    # -- running ----------------------------------------------------------------------------

    async def run(self, main: Coroutine[Any, Any, Any]) -> Outcome:
        """Drive ``main`` (the function called with its root context) until it blocks or ends."""
        if CANCEL_AT_TAG in self.root.tags and self.cancel_record is None:
            # A timeout with cleanup: its timer must exist before anything else happens.
            try:
                blocked = await self._guarded(self.cancel_promise())
            except BaseException:  # the worker stops: ``main`` never runs
                main.close()
                raise
            if blocked is not None:
                main.close()
                return blocked
        watch = asyncio.ensure_future(self.watch())
        outcome: Outcome
        try:
            try:
                outcome = Done(await main)
            except asyncio.CancelledError:
                for task in list(self.inflight):  # the worker is stopping: stop the steps too
                    task.cancel()
                raise
            except ExecutionSignal as signal:
                outcome = Abort(signal)
            except BaseExceptionGroup as group:
                outcome = _classify_group(group)
            except Exception as error:
                outcome = self._failed(error)
            await self.drain()
        finally:
            watch.cancel()
            if self.runtime.watching.get(self.cancel_id) is self:
                del self.runtime.watching[self.cancel_id]
            if watch.done() and not watch.cancelled() and watch.exception() is not None:
                log.debug("listening for %s failed: %r", self.cancel_id, watch.exception())
        if self.signal is not None:
            return Abort(self.signal)
        if isinstance(outcome, Abort) and isinstance(outcome.signal, Suspended):
            if not self.awaited:
                return Abort(Aborted("the function suspended without awaiting a promise"))
            if self.cancellation is None:
                # Every suspend awaits the cancel promise too, so a cancellation wakes it.
                blocked = await self._guarded(self.cancel_promise())
                if blocked is not None:
                    return blocked
            if self.cancellation is not None and not self.canceled_at_start:
                return Rerun()
            if self.cancellation is None:
                self.awaited.add(self.cancel_id)
            return Suspend(sorted(self.awaited))
        return outcome

    def _failed(self, error: Exception) -> Outcome:
        """How the function's own exception ends the run: a programming error of its own
        code (``halt_on``) halts the task, to be resumed once fixed; anything else, and
        any failure of a durable call re-raised through it (``recorded``), rejects it."""
        if isinstance(error, self.runtime.halt_on) and not recorded(error):
            return Abort(CodeError(self.root.id, error))
        return Failed(error)

    async def _guarded(self, write: Coroutine[Any, Any, Any]) -> Abort | None:
        """Run a write of the run's own; the outcome to end with if it failed."""
        try:
            await write
        except ExecutionSignal as signal:
            return Abort(self.signal or signal)
        except Exception as error:
            return Abort(self.signal or Aborted(f"could not record {self.cancel_id}: {error}"))
        return None


def _classify_group(group: BaseExceptionGroup) -> Outcome:
    """A task group that unwound: suspended if any branch suspended, else failed."""
    signals, errors = group.split(ExecutionSignal)
    if signals is not None:
        for leaf in _leaves(signals):
            if not isinstance(leaf, Suspended):
                return Abort(leaf)  # type: ignore[arg-type]
        return Abort(Suspended())
    return Failed(errors if errors is not None else group)


def _leaves(group: BaseExceptionGroup) -> list[BaseException]:
    out: list[BaseException] = []
    for e in group.exceptions:
        out.extend(_leaves(e) if isinstance(e, BaseExceptionGroup) else [e])
    return out
