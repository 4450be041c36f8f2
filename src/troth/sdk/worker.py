"""The worker loop: execute messages in, tasks driven to a suspend, a fulfill or a release.

For each ``execute`` message the worker acquires the task at the message's version, runs
the function (``Execution``) and then, by the outcome (``Worker._after``, one handler each):

- it returned or raised for good: ``task.fulfill`` settles the promise and the task at once;
- it raised and its retry policy allows another attempt: the failure is recorded (as a
  step's is, ``troth.sdk.attempts``) and, after the wait, it runs again here;
- it awaits pending promises: one ``task.suspend`` registers all of them; a 300 (one of
  them settled meanwhile) continues at once in this loop, with the preload it carries;
- it was canceled while it ran (``troth.sdk.cancellation``) and then blocked: it runs
  again at once, now knowing the cancellation from its first call, so that every replay
  observes it at the same calls;
- the server was unreachable or answered unexpectedly: ``task.release``, so another
  attempt (here or elsewhere) picks it up;
- a 404/409 on any task operation: another process holds the task now (the lease lapsed,
  or the message was stale). That is the protocol working, logged at debug level;
- a replay diverged from its history: the reason is recorded for its callers (a halt
  record, see ``troth.sdk.halts``), then ``task.halt``, logged as an error for an operator.

One heartbeat request every TTL/2 extends the lease of every task held, from a thread of
its own against a server (``troth.sdk.heartbeat``; the leases, and the rule that a run
starts no step unless its lease is certainly live, are ``troth.sdk.leases``), and at most
``concurrency`` tasks run at once (further messages wait for a slot before acquiring).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from troth.protocol.conventions import FUNC_TAG
from troth.protocol.ids import origin
from troth.protocol.kinds import Kind
from troth.protocol.messages import Execute, Message
from troth.protocol.records import (
    BRANCH,
    ORIGIN,
    PromiseRecord,
    PromiseState,
    SettleState,
    TaskRecord,
    TaskRef,
    Value,
    is_timer,
)
from troth.protocol.requests import (
    CallbackAction,
    PromiseRegisterCallbackRequest,
    PromiseSettleRequest,
    SettleAction,
    TaskAcquireRequest,
    TaskFulfillRequest,
    TaskHaltRequest,
    TaskReleaseRequest,
    TaskSuspendRequest,
)
from troth.protocol.subjects import TASK_ID
from troth.sdk import attempts, stalls
from troth.sdk.closing import finish
from troth.sdk.codec import convert, encode_error
from troth.sdk.context import Context
from troth.sdk.errors import (
    CanceledError,
    ExecutionSignal,
    FunctionNotFoundError,
    LeaseLost,
    MustHalt,
    NetworkError,
    Stopping,
    UnstorableValueError,
)
from troth.sdk.execution import (
    Abort,
    Done,
    Execution,
    Failed,
    Outcome,
    Rerun,
    Runtime,
    Suspend,
)
from troth.sdk.halts import halt_record, halt_records, halt_value
from troth.sdk.heartbeat import heartbeat_for
from troth.sdk.known import Known
from troth.sdk.leases import HeldTask
from troth.sdk.network import action_head
from troth.sdk.registry import Registered
from troth.sdk.retry import RetryPolicy, default_policy, next_retry
from troth.sdk.stalls import Where
from troth.sdk.steps import invoke

log = logging.getLogger(__name__)

MAX_SETBACK_BACKOFF = 60.0


@dataclass
class Drive:
    """A task in this worker's hands: the registered function its root names, with the
    arguments, and the attempt the next run makes."""

    runtime: Runtime
    task: HeldTask
    root: PromiseRecord
    entry: Registered
    args: list[Any]
    kwargs: dict[str, Any]
    attempt: int = 1
    known: Known = field(init=False)  # what exists of the branch (``troth.sdk.known``)

    def __post_init__(self) -> None:
        self.known = Known(first_run=self.task.version == 1)

    @property
    def policy(self) -> RetryPolicy:
        return self.entry.retry or default_policy(self.entry.durable)

    def execution(self, preload: list[PromiseRecord]) -> Execution:
        """A new run of the function, knowing the promises in ``preload``."""
        return Execution(self.runtime, self.task, self.root, preload, self.known)

    def main(self, execution: Execution) -> Coroutine[Any, Any, Any]:
        """The function called for ``execution``, with a root context if it is durable."""
        ctx = None
        if self.entry.durable:
            root = self.root
            ctx = Context(
                execution,
                root.id,
                root.tags.get(ORIGIN) or origin(root.id),
                root.tags.get(BRANCH) or root.id,
                root.timeout_at,
                attempt=self.attempt,
            )
        return invoke(self.runtime, self.entry.fn, ctx, self.args, self.kwargs, self.where)

    @property
    def where(self) -> Where:
        """The function's own code, as stalls of the event loop name it."""
        return Where(self.root.id, None, self.entry.name)


class Worker:
    def __init__(
        self,
        runtime: Runtime,
        concurrency: int,
        on_settled: Callable[[PromiseRecord], None],
    ) -> None:
        self.runtime = runtime
        self.leases = runtime.leases
        self._slots = asyncio.Semaphore(concurrency)
        self._on_settled = on_settled
        self._jobs: set[asyncio.Task[None]] = set()
        self._driving: dict[str, asyncio.Future[None]] = {}  # the run of each task, by id
        self._heartbeat = heartbeat_for(self.leases, runtime.network, runtime.clock)
        # Tasks this worker released without progress (function or version not registered,
        # server trouble), by id, with how often: a later message for one waits before
        # acquiring, so a release (which re-dispatches at once) cannot become a hot loop.
        self._setbacks: dict[str, int] = {}

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        self._heartbeat.start()

    async def stop(self, grace: float) -> None:
        """Stop taking work, let running steps finish and record their results for up to
        ``grace`` seconds, then hand every task still held back, so that another worker
        resumes it at once instead of after its lease lapses.

        Runs stop at their next durable call (``Stopping``) and release their task
        themselves; what is still running after the grace period is cancelled, and its task
        released here (its finished steps are recorded; the one cut off runs again).
        """
        self.runtime.stopping.set()
        running = [job for job in self._jobs if not job.done()]
        if running:
            # The grace period on the app's clock (virtual time in tests), not the loop's.
            grace_over = asyncio.ensure_future(self.runtime.clock.sleep(grace))
            all_done = asyncio.ensure_future(asyncio.wait(running))
            await asyncio.wait([grace_over, all_done], return_when=asyncio.FIRST_COMPLETED)
            grace_over.cancel()
            all_done.cancel()
            late = [job for job in running if not job.done()]
            if late:
                log.warning(
                    "%d task(s) still running after the %.3g s grace period; cancelling",
                    len(late),
                    grace,
                )
        # A cancelled drive forgets its task before we release it.
        held = {task.id: task for task in self.leases.held()}
        jobs = list(self._jobs)
        await self._heartbeat.stop()
        for job in jobs:
            job.cancel()
        await finish(jobs, "a cancelled run")
        held.update({task.id: task for task in self.leases.held()})
        for task in held.values():
            with contextlib.suppress(Exception):
                await self._send(Kind.TASK_RELEASE, TaskReleaseRequest(task.id, task.version))
        self.leases.clear()

    def spawn(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        job = asyncio.ensure_future(work)
        self._jobs.add(job)
        job.add_done_callback(self._jobs.discard)
        return job

    # -- messages -----------------------------------------------------------------------------

    def on_message(self, message: Message) -> None:
        if isinstance(message, Execute):
            if self.runtime.stopping.is_set():
                return  # not acquired: the server sends it again, to a worker that runs
            self.spawn(self._execute(message.data.task))
        else:
            promise = message.data.promise
            self.runtime.settled.add(promise)
            self._on_settled(promise)
            watching = self.runtime.watching.get(promise.id)
            if watching is not None:  # a running execution's cancellation
                watching.on_cancel(promise)

    async def _execute(self, task: TaskRef) -> None:
        earlier = self._driving.get(task.id)
        if earlier is not None:
            # An earlier run of the task is still ending here (its lease lapsed under it):
            # it records what it knows of its cut-off attempt before the next run counts
            # the attempts (``troth.sdk.attempts``). A run stuck for good is not waited for.
            # On the app's clock (virtual time in tests), not the loop's.
            lapse = asyncio.ensure_future(self.runtime.clock.sleep(self.leases.ttl_ms / 1000))
            await asyncio.wait([earlier, lapse], return_when=asyncio.FIRST_COMPLETED)
            lapse.cancel()
        setbacks = self._setbacks.get(task.id)
        if setbacks:
            await self.runtime.clock.sleep(min(0.5 * 2**setbacks, MAX_SETBACK_BACKOFF))
        async with self._slots:
            if self.runtime.stopping.is_set():
                return  # it waited for a slot while the worker began to stop
            acquire = TaskAcquireRequest(
                task.id, task.version, self.runtime.network.pid, self.leases.ttl_ms
            )
            sent = self.runtime.clock.now()
            try:
                status, body = await self.runtime.network.send(Kind.TASK_ACQUIRE, acquire)
            except NetworkError as e:
                log.warning("could not acquire task %s: %s", task.id, e)
                return
            if status in (404, 409):
                log.debug("task %s v%d was taken or is gone", task.id, task.version)
                return
            if status != 200 or body.task is None:
                log.warning("%s %s answered %s: %s", Kind.TASK_ACQUIRE, task.id, status, body)
                return
            await self._drive(body.task, body.promise, body.preload, sent)

    async def drive(
        self, task: TaskRecord, root: PromiseRecord, preload: list[PromiseRecord], sent: int
    ) -> None:
        """Drive a task this process already holds (from a ``task.create`` sent at ``sent``)."""
        async with self._slots:
            await self._drive(task, root, preload, sent)

    # -- driving one task ---------------------------------------------------------------------

    async def _drive(
        self, task: TaskRecord, root: PromiseRecord, preload: list[PromiseRecord], sent: int
    ) -> None:
        held = HeldTask(task.id, task.version)
        self.leases.hold(held, sent)
        log.info("task %s v%d taken: %s", task.id, task.version, root.tags.get(FUNC_TAG, "?"))
        driving = asyncio.ensure_future(self._run(held, root, preload))
        self._driving[task.id] = driving
        try:
            await driving
        except NetworkError as e:
            log.warning("task %s: server unreachable (%s); releasing", held.id, e)
            await self._release(held)
        finally:
            self.leases.drop(held)
            if self._driving.get(task.id) is driving:
                del self._driving[task.id]

    async def _run(self, task: HeldTask, root: PromiseRecord, preload: list[PromiseRecord]) -> None:
        """Run the task's function, again after each outcome that continues it here, until
        the task leaves this worker's hands."""
        if is_timer(root.tags):
            # A sleep created by an SDK that targets its timers: nothing to run; its deadline
            # settles it. Let the lease lapse rather than release (a release re-dispatches).
            log.debug("task %s is a timer; leaving it to its deadline", task.id)
            return
        drive = await self._prepare(task, root)
        if drive is None:
            return
        execution = await self._resume(drive, preload)
        while execution is not None and self.leases.drives(task):  # else a newer run drives it
            tracing, metrics = self.runtime.tracing, self.runtime.metrics
            metrics.run_started(execution, drive.entry.name)
            outcome: Outcome | None = None
            try:
                with tracing.execution(root, drive.entry.name, task.version, drive.attempt) as run:
                    outcome = await execution.run(drive.main(execution))
                    run.ended(outcome)
            finally:
                metrics.run_finished(execution, outcome)
            execution = await self._after(drive, execution, outcome)

    async def _after(
        self, drive: Drive, execution: Execution, outcome: Outcome
    ) -> Execution | None:
        """Act on how a run ended; the execution to run next, or None once the task has left
        this worker's hands (fulfilled, suspended, released, halted or lost)."""
        match outcome:
            case Done(value):
                await self._fulfill(execution, value, None)
            case Failed(error):
                return await self._retry(drive, execution, error)
            case Suspend(awaited):
                resumed = await self._suspend(drive.task, awaited)
                return drive.execution(resumed) if resumed is not None else None
            case Rerun():
                return drive.execution([])
            case Abort(signal):
                await self._abort(execution, signal)
        return None

    async def _prepare(self, task: HeldTask, root: PromiseRecord) -> Drive | None:
        """The function the task's root names, with its arguments; None if this worker
        cannot run it (the task is released, for a worker that can)."""
        try:
            entry, args, kwargs = self._resolve(root)
        except FunctionNotFoundError as e:
            log.error(
                "task %s: %s in this worker (registered: %s); releasing it for a worker "
                "that has it",
                task.id,
                e,
                ", ".join(self.runtime.registry.names()) or "nothing",
            )
            await self._release(task)
            return None
        except Exception as e:
            log.error("task %s: cannot decode its invocation (%r); releasing", task.id, e)
            await self._release(task)
            return None
        return Drive(self.runtime, task, root, entry, args, kwargs)

    async def _resume(self, drive: Drive, preload: list[PromiseRecord]) -> Execution | None:
        """The first run of this worker's hold, at the attempt after the root's recorded
        failures, once the wait before it is over; None if the wait ended the hold."""
        # Failed attempts of the root are recorded like a step's (``troth.sdk.attempts``);
        # they share the root's branch, so the preload carries them here.
        execution = drive.execution(preload)
        failures = await attempts.failures(execution, drive.root.id, verify=False)
        drive.attempt = len(failures) + 1
        if failures and (at := attempts.retry_at(failures[-1])) is not None:
            try:
                await execution.pause(max(0.0, (at - self.runtime.clock.now()) / 1000))
            except ExecutionSignal as signal:  # a stop: hand the task back, as _retry does
                await self._abort(execution, signal)
                return None
        return execution

    async def _retry(
        self, drive: Drive, execution: Execution, error: BaseException
    ) -> Execution | None:
        """The function raised: the next attempt, if its policy allows one (the failure is
        recorded first, as a step's is); else the root is rejected with the error."""
        now = self.runtime.clock.now()
        wait = next_retry(drive.policy, drive.attempt, error, (), now, drive.root.timeout_at)
        if wait is None or isinstance(error, UnstorableValueError | CanceledError):
            await self._fulfill(execution, None, error)
            return None
        log.warning(
            "task %s failed (attempt %d: %r); retrying in %.3g s",
            drive.task.id,
            drive.attempt,
            error,
            wait,
            extra={TASK_ID: drive.task.id},
        )
        try:
            await attempts.record_failure(execution, drive.root, drive.attempt, error, wait)
            await execution.pause(wait)
        except ExecutionSignal as signal:
            await self._abort(execution, signal)
            return None
        drive.attempt += 1
        return drive.execution([])

    def _resolve(self, root: PromiseRecord) -> tuple[Registered, list[Any], dict[str, Any]]:
        """The registered function a task's param names, and its decoded arguments."""
        invocation = self.runtime.codec.decode(root.param)
        if not isinstance(invocation, dict) or not isinstance(invocation.get("func"), str):
            raise ValueError("the param is not {func, args}")
        name = invocation["func"]
        version = invocation.get("version")
        if not isinstance(version, int):
            version = None
        entry = self.runtime.registry.get(name, version)
        if entry is None:
            raise FunctionNotFoundError(name, version)
        raw_args = invocation.get("args") or []
        raw_kwargs = invocation.get("kwargs") or {}
        params, _ = entry.hints
        if entry.durable:
            params = params[1:]
        return entry, _convert_args(params, raw_args), _convert_kwargs(params, raw_kwargs)

    # -- the task operations ------------------------------------------------------------------

    async def _send(self, kind: Kind, data: Any) -> tuple[int, Any]:
        return await self.runtime.network.send(kind, data)

    async def _fulfill(self, execution: Execution, value: Any, error: BaseException | None) -> None:
        """Settle the root with the function's value, or its error (``rejected_canceled``
        for a ``CanceledError``); a value that cannot be recorded rejects the root with
        ``UnstorableValueError`` instead."""
        task = execution.task
        codec = self.runtime.codec
        if error is None:
            try:
                encoded = codec.encode(value)
            except UnstorableValueError as e:
                error = e
        if error is not None:
            encoded = encode_error(codec, error)
        stalled = self.runtime.stalls.stalled_ms(Where(execution.root.id, None, ""))
        encoded = stalls.mark(encoded, stalled)
        state = SettleState.RESOLVED if error is None else SettleState.REJECTED
        if isinstance(error, CanceledError):
            state = SettleState.REJECTED_CANCELED
        status, body = await self._settle_root(task, state, encoded)
        if status == 413:
            refused = UnstorableValueError(
                f"the server refused the result of {task.id!r} as too large (413: {body}); "
                "lower Troth(max_value_bytes=...) below the server's limit"
            )
            status, body = await self._settle_root(
                task, SettleState.REJECTED, encode_error(codec, refused)
            )
        if status == 200:
            log.info("task %s finished: %s", task.id, body.promise.state)
            self._setbacks.pop(task.id, None)
            self.runtime.settled.add(body.promise)
            self._on_settled(body.promise)
            cancel = execution.cancel_record
            if cancel is not None and cancel.state == PromiseState.PENDING:
                self.spawn(self._tidy(cancel.id))
        elif status in (404, 409):
            log.debug("task %s was no longer ours to fulfill", task.id)
        else:
            log.warning("%s %s answered %s: %s", Kind.TASK_FULFILL, task.id, status, body)

    async def _settle_root(
        self, task: HeldTask, state: SettleState, value: Value
    ) -> tuple[int, Any]:
        settle = PromiseSettleRequest(task.id, state, value)
        request = TaskFulfillRequest(
            task.id, task.version, SettleAction(Kind.PROMISE_SETTLE, action_head(), settle)
        )
        return await self._send(Kind.TASK_FULFILL, request)

    async def _suspend(self, task: HeldTask, awaited: list[str]) -> list[PromiseRecord] | None:
        """Suspend on every awaited promise; the preload to continue with on a 300."""
        actions = [
            CallbackAction(
                Kind.PROMISE_REGISTER_CALLBACK,
                action_head(),
                PromiseRegisterCallbackRequest(awaited=a, awaiter=task.id),
            )
            for a in awaited
        ]
        status, body = await self._send(
            Kind.TASK_SUSPEND, TaskSuspendRequest(task.id, task.version, actions)
        )
        if status == 200:
            self._setbacks.pop(task.id, None)
            return None
        if status == 300:
            return list(body.preload)
        if status in (404, 409):
            log.debug("task %s was no longer ours to suspend", task.id)
            return None
        log.warning("%s %s answered %s: %s; releasing", Kind.TASK_SUSPEND, task.id, status, body)
        await self._release(task)
        return None

    async def _abort(self, execution: Execution, signal: BaseException) -> None:
        """The run cannot go on here: the task is released, halted, or left to its holder."""
        task = execution.task
        match signal:
            case Stopping():
                log.info("task %s: %s; releasing it", task.id, signal)
                await self._release(task, setback=False)
            case MustHalt():
                await self._halt(execution, signal)
            case LeaseLost():
                log.warning(
                    "task %s: %s; this run stops and the task's next run takes over",
                    task.id,
                    signal,
                    extra={TASK_ID: task.id},
                )
            case _:
                log.warning("task %s: %s; releasing", task.id, signal)
                await self._release(task)

    async def _halt(self, execution: Execution, error: MustHalt) -> None:
        """The run cannot go on until an operator acts (its replay diverged from its history,
        a step lost its lease again and again): record why, then ``task.halt``."""
        task = execution.task
        # ERROR, not WARNING: the execution waits for an operator (docs/logging.md).
        log.error("task %s halts: %s", task.id, error, extra={TASK_ID: task.id})
        try:
            await self._record_halt(execution, error)
        except LeaseLost as e:
            # Another run holds the task now; it meets the same history and halts.
            log.warning("task %s: %s; not halting it", task.id, e, extra={TASK_ID: task.id})
            return
        except (Exception, ExecutionSignal) as e:
            log.error("task %s: could not record why it halts (%s); halting", task.id, e)
        status, body = await self._send(Kind.TASK_HALT, TaskHaltRequest(task.id))
        if status != 200:
            log.error("%s %s answered %s: %s", Kind.TASK_HALT, task.id, status, body)

    async def _record_halt(self, execution: Execution, error: MustHalt) -> None:
        """Record why the task halts, before halting it (``task.halt`` carries no reason):
        the execution's next halt record (see ``troth.sdk.halts``) is resolved with the
        reason and this run's task version, through fenced writes, so that only the run
        that holds the task records it. Its callers, here and in other processes, wait on
        that record too, so the halt wakes them."""
        root = execution.root
        n = len(await halt_records(execution.read, root.id)) + 1
        record = await execution.create(halt_record(root, n))
        if record.state == PromiseState.PENDING:
            value = halt_value(execution.task.version, str(error))
            record = await execution.settle(
                record.id, SettleState.RESOLVED, self.runtime.codec.encode(value)
            )
        self._on_settled(record)

    async def _tidy(self, cancel_id: str) -> None:
        """Settle an ended execution's cancel promise, which no cancellation can use now
        (``rejected_canceled``: "no cancellation will come"); only tidiness, so a failure is
        left to the promise's deadline."""
        settle = PromiseSettleRequest(cancel_id, SettleState.REJECTED_CANCELED, Value())
        with contextlib.suppress(Exception):
            await self._send(Kind.PROMISE_SETTLE, settle)

    async def _release(self, task: HeldTask, setback: bool = True) -> None:
        if setback:
            self._setbacks[task.id] = self._setbacks.get(task.id, 0) + 1
            if len(self._setbacks) > 10_000:  # forget the oldest
                del self._setbacks[next(iter(self._setbacks))]
        try:
            release = TaskReleaseRequest(task.id, task.version)
            status, _ = await self._send(Kind.TASK_RELEASE, release)
        except NetworkError as e:
            log.warning("%s %s failed (%s); its lease will lapse", Kind.TASK_RELEASE, task.id, e)
            return
        if status == 200:
            log.info("task %s released", task.id)
        elif status not in (404, 409):
            log.warning("%s %s answered %s", Kind.TASK_RELEASE, task.id, status)

def _convert_args(params: list[tuple[str, Any, Any]], raw: list[Any]) -> list[Any]:
    out: list[Any] = []
    positional = [
        p
        for p in params
        if p[1] in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    rest = next((p for p in params if p[1] == inspect.Parameter.VAR_POSITIONAL), None)
    for i, value in enumerate(raw):
        if i < len(positional):
            out.append(convert(value, positional[i][2]))
        else:
            out.append(convert(value, rest[2] if rest else None))
    return out


def _convert_kwargs(params: list[tuple[str, Any, Any]], raw: dict[str, Any]) -> dict[str, Any]:
    hints = {name: hint for name, _, hint in params}
    return {k: convert(v, hints.get(k)) for k, v in raw.items()}
