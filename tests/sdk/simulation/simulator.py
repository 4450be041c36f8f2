"""One seed's run: three workers, a client and the oracle, on one virtual timeline.

The workers are real ``Troth`` apps (the SDK's worker loop, replay, retries, heartbeat)
whose transport is a ``SimNetwork``. The client starts every root workflow — half of them
(chosen by the seed) with ``app.run`` on a worker, as a ``task.create`` the worker drives at
once, the others with ``rpc`` from a separate client app — retrying until the start is
acknowledged, and settles the external promises a little later. The chaos: every hop may
lose, duplicate or delay what it carries (``Faults``), and workers crash at random times:
all their tasks are cancelled without a word to the server (no release), and a new
incarnation with a new pid boots a few seconds later. Workers are also stopped gracefully
(``app.stop()`` with a grace period in virtual time), replaced the same way; and the server
restarts (unreachable for a while, its state intact). Every incarnation booted after the
first three runs the redeployed code of ``deploy`` (``workflows.register``). Leases lapse
in virtual time, the oracle's timeouts fire when they fall due, and the run ends when every
root is settled (or, for the changed workflow, its task halted).

The event loop's own clock is the virtual one (``VirtualTimeLoop``): ``Worker.stop`` waits
out its grace period with ``asyncio.wait(timeout=...)`` on the loop's clock rather than the
app's ``Clock``, so that timer is an event on the virtual timeline like any other. Any
other loop timer still fails the run (``Scheduler.quiesce``): the SDK's waits go through
its ``Clock``.
"""

from __future__ import annotations

import asyncio
import math
import random
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from troth.protocol.conventions import STEP_TAG
from troth.protocol.records import PARENT, PromiseState, TaskState
from troth.sdk import Troth
from troth.sdk.codec import is_error_json
from troth.sdk.network import Network

from .faults import RESTART_CHANCES, Faults
from .network import SimNetwork, Wire
from .scheduler import Scheduler, SimulationError
from .server import InvariantViolation, SimServer
from .workflows import (
    BODY_LIMIT,
    CANCEL_REASON,
    CANCELS,
    CHANGED,
    EFFECTS,
    EXTERNAL,
    MAX_VALUE_BYTES,
    ROOTS,
    Effects,
    Entry,
    Root,
    register,
)

GROUP = "sim"
START = 1_700_000_000_000
WORKERS = ("w1", "w2", "w3")
TTL = timedelta(seconds=4)
RETRY_TIMEOUT = 2000  # the server's: a pending task is offered again this often (ms)
CLIENT_RETRY = 1.0  # seconds between the client's attempts
LIMIT_MS = 15 * 60_000  # a run still unfinished after this much virtual time is stuck


class SimTroth(Troth):
    """A ``Troth`` app whose transport is the simulated wire."""

    def __init__(self, network: SimNetwork, **kwargs: Any) -> None:
        super().__init__(
            group=network.group,
            pid=network.pid,
            clock=network.clock,
            max_value_bytes=MAX_VALUE_BYTES,
            **kwargs,
        )
        self._network = network

    def _make_network(self) -> Network:
        return self._network


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop whose clock reads the simulation's virtual time (see the module)."""

    def __init__(self, sched: Scheduler) -> None:
        super().__init__()
        self._sched = sched

    def time(self) -> float:
        return self._sched.now() / 1000

    def next_timer(self) -> int | None:
        """The first virtual ms at which the earliest loop timer still armed is due (the
        loop runs a timer once its clock is past it, not at it)."""
        timers = [h.when() for h in self._scheduled if not h.cancelled()]  # type: ignore[attr-defined]
        return math.floor(min(timers) * 1000) + 1 if timers else None


@dataclass
class Incarnation:
    pid: str
    app: SimTroth
    network: SimNetwork
    redeployed: bool  # runs the new code of the changed workflow


Outcome = dict[str, tuple[str, Any]]


@dataclass
class Result:
    seed: int
    faults: Faults
    outcome: Outcome  # every promise: its state and (normalized) value
    ledger: list[Entry]
    settled: dict[str, int]  # promise id -> its settlement's place in the order
    step_promises: dict[str, str]  # promise id -> its troth:step tag, for ledger keys
    trace: list[str]
    stats: dict[str, int] = field(default_factory=dict)
    error: AssertionError | None = None  # the run stopped early: an invariant, or stuck
    tags: dict[str, dict[str, str]] = field(default_factory=dict)  # promise id -> its tags
    halted: list[str] = field(default_factory=list)  # tasks the run ended with halted
    halts: list[tuple[str, str]] = field(default_factory=list)  # (pid, task): task.halt 200
    redeployed: list[str] = field(default_factory=list)  # pids that ran the new code
    created: dict[str, int] = field(default_factory=dict)  # promise id -> its creation's place


class Simulation:
    def __init__(self, seed: int, faults: Faults | None = None, max_work_ms: int = 800) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.faults = Faults.draw(self.rng) if faults is None else faults
        self.sched = Scheduler(START)
        # One seed in five meets a server without troth's task.fences (the reference server).
        extension = seed % 5 != 4
        self.server = SimServer(RETRY_TIMEOUT, self.sched.order, BODY_LIMIT, extension)
        self.wire = Wire(self.sched, self.server, self.faults, self.rng)
        self.effects = Effects(self.sched, self.rng, max_work_ms)
        self.workers: dict[str, Incarnation] = {}
        self.incarnations: list[Incarnation] = []
        self.boots = 0
        self.unhandled: list[str] = []
        client = SimNetwork(self.wire, GROUP, "client")  # sends only; never connects
        self.client = SimTroth(client)
        register(self.client)

    def run(self) -> Result:
        self.loop = VirtualTimeLoop(self.sched)
        with asyncio.Runner(loop_factory=lambda: self.loop) as runner:
            return runner.run(self._main())

    async def _main(self) -> Result:
        loop = asyncio.get_running_loop()
        loop.set_task_factory(self.sched.task_factory)
        loop.set_exception_handler(self._unhandled)
        EFFECTS.set(self.effects)  # every task started from here on sees this world
        self.sched.log(f"seed {self.seed} {self.faults}")
        for name in WORKERS:
            self._boot(name)
        clients = [asyncio.ensure_future(self._start(r, self.rng.random() < 0.5)) for r in ROOTS]
        clients += [asyncio.ensure_future(self._answer(id, a)) for id, a in EXTERNAL.items()]
        clients += [asyncio.ensure_future(self._cancel(id, p)) for id, p in CANCELS.items()]
        window = self.faults.crash_window_ms
        for _ in range(self.faults.crashes):
            self.sched.after(self.rng.randint(0, window), self._crash)
        for _ in range(self.faults.stops):
            self.sched.after(self.rng.randint(0, window), self._stop)
        for _ in range(RESTART_CHANCES):
            if self.faults.happens(self.rng, self.faults.restart):
                self.sched.after(self.rng.randint(0, window), self._restart)
        error = None
        try:
            await self._loop()
        except (InvariantViolation, SimulationError) as e:
            error = e
            self.sched.log(f"stopped: {e}")
        for worker in self.workers.values():
            self._kill(worker)
        for client in clients:
            client.cancel()
        await self.sched.quiesce()
        if error is None and self.unhandled:
            error = SimulationError(f"exceptions nobody handled: {self.unhandled}")
        return self._result(error)

    def _unhandled(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """An exception no task retrieved: an SDK job died of something it did not expect."""
        self.unhandled.append(f"{context.get('message')}: {context.get('exception')!r}")
        self.sched.log(f"unhandled: {self.unhandled[-1]}")

    async def _loop(self) -> None:
        while True:
            await self.sched.quiesce()
            if all(self._ended(root) for root in ROOTS):
                return
            event, timer = self.sched.next_time(), self.loop.next_timer()
            deadline = None if self.server.down else self.server.next_deadline()
            due = [t for t in (event, timer, deadline) if t is not None]
            if not due:
                raise SimulationError("stuck: nothing can happen and the roots are pending")
            when = min(due)
            if when - START > LIMIT_MS:
                raise SimulationError(f"not finished after {LIMIT_MS} ms of virtual time")
            self.sched.advance_to(when)
            action = self.sched.pop_due()
            if action is not None:  # at one instant, what is in flight arrives first
                action()
                continue
            if when == timer:  # the loop runs it in the next ``quiesce``
                continue
            fired, sent = self.server.tick(when)
            self.sched.log(f"server fired {', '.join(fired)}")
            self.wire.route(sent)

    def _ended(self, root: Root) -> bool:
        """Settled; or, for the changed workflow, halted (it waits for an operator)."""
        if self.server.settled_state(root.id):
            return True
        task = self.server.oracle.state.get_task(root.id)
        return root.id == CHANGED and task is not None and task.state == TaskState.HALTED

    # -- workers ----------------------------------------------------------------------------

    def _boot(self, name: str) -> None:
        self.boots += 1
        pid = f"{name}-{self.boots}"
        redeployed = self.boots > len(WORKERS)  # a replacement runs the code deployed since
        network = SimNetwork(self.wire, GROUP, pid)
        grace = timedelta(milliseconds=self.faults.grace_ms)
        app = SimTroth(network, ttl=TTL, shutdown_grace=grace)
        register(app, redeployed_code=redeployed)
        self.workers[name] = Incarnation(pid, app, network, redeployed)
        self.incarnations.append(self.workers[name])
        self.sched.log(f"{pid} boots{' (redeployed code)' if redeployed else ''}")
        self.sched.spawn(pid, app.start())

    def _stop(self) -> None:
        """Stop a worker gracefully, as SIGTERM does; boot its replacement once stopped."""
        live = [n for n, w in self.workers.items() if w.network.alive and not w.network.stopping]
        if not live:
            return
        name = self.rng.choice(live)
        worker = self.workers[name]
        self.sched.log(f"{worker.pid} stops (grace {self.faults.grace_ms} ms)")
        self.server.stats["graceful stop"] += 1
        worker.network.stopping = True
        self.sched.spawn(worker.pid, self._stopping(name, worker))

    async def _stopping(self, name: str, worker: Incarnation) -> None:
        self.sched.graceful += 1
        try:
            await worker.app.stop()
        finally:  # also when a crash cuts the stop short (that crash boots the replacement)
            self.sched.graceful -= 1
        self.sched.log(f"{worker.pid} stopped")
        self.server.stats["stopped"] += 1
        self._kill(worker)  # what is left (a client's handle) ends with the process
        self.sched.after(self.rng.randint(500, 8000), lambda: self._boot(name))

    def _restart(self) -> None:
        if self.server.down:
            return
        self.wire.restart()
        self.sched.after(self.faults.restart_ms, self.wire.back)

    def _crash(self) -> None:
        live = [name for name, w in self.workers.items() if w.network.alive]
        if not live:
            return
        name = self.rng.choice(live)
        worker = self.workers[name]
        self.sched.log(f"{worker.pid} crashes")
        self.server.stats["crash"] += 1
        self._kill(worker)
        self.sched.after(self.rng.randint(500, 8000), lambda: self._boot(name))

    def _kill(self, worker: Incarnation) -> None:
        worker.network.alive = False
        worker.network.disconnect()
        self.sched.kill(worker.pid)

    # -- the client -------------------------------------------------------------------------

    async def _start(self, root: Root, via_run: bool) -> None:
        """Start ``root`` and retry until the server has acknowledged it."""
        await self.sched.sleep(self.rng.randint(0, 2000) / 1000)
        while True:
            live = [w for w in self.workers.values() if w.network.alive]
            live = [w for w in live if not w.network.stopping]  # no new work to a stopping one
            if via_run and live:
                worker = self.rng.choice(live)
                job = self.sched.spawn(worker.pid, _run_on(worker.app, root))
            else:
                starts = self.client.options(**root.options)
                job = asyncio.ensure_future(starts.rpc(root.id, root.fn, *root.args).done())
            await asyncio.wait([job])
            if not job.cancelled() and job.exception() is None:
                return
            await self.sched.sleep(CLIENT_RETRY)

    async def _answer(self, root: str, value: Any) -> None:
        """Settle the promise ``root`` waits on from outside, as a person or a webhook would:
        once it appears (found the way an operator's console would list it), after a while."""
        await self.sched.sleep(self.rng.randint(1000, 10_000) / 1000)
        while True:
            id = self._external(root)
            try:
                if id is not None:
                    await self.client.promises.resolve(id, value)
                    self.sched.log(f"client resolved {id}")
                    return
            except Exception as e:  # the request or its reply was lost
                self.sched.log(f"client could not resolve {id}: {e}")
            await self.sched.sleep(CLIENT_RETRY)

    async def _cancel(self, root: str, after: str) -> None:
        """Cancel ``root`` (``app.cancel``) a while after promise ``after`` appears,
        retrying until the request is acknowledged."""
        while self.server.oracle.state.get_promise(after) is None:
            await self.sched.sleep(0.5)
        await self.sched.sleep(self.rng.randint(0, 5000) / 1000)
        while True:
            try:
                await self.client.cancel(root, CANCEL_REASON)
                self.sched.log(f"client canceled {root}")
                self.server.stats["canceled"] += 1
                return
            except Exception as e:  # the request or its reply was lost
                self.sched.log(f"client could not cancel {root}: {e}")
            await self.sched.sleep(CLIENT_RETRY)

    def _external(self, root: str) -> str | None:
        for p in self.server.oracle.state.promises:
            if p.tags.get(PARENT) == root and p.tags.get(STEP_TAG) == "promise":
                return p.id
        return None

    # -- the end ----------------------------------------------------------------------------

    def _result(self, error: AssertionError | None) -> Result:
        """The workflows' promises — roots and every durable call (``troth:step``) — as the
        outcome. The SDK's helpers are left out: the timer ``ctx.promise`` adds at a
        promise's deadline exists only if the promise was still pending when first reached."""
        codec = self.client.codec
        roots = {root.id for root in ROOTS}
        outcome: Outcome = {}
        steps: dict[str, str] = {}
        tags: dict[str, dict[str, str]] = {}
        for p in self.server.oracle.state.promises:
            if p.id not in roots and p.tags.get(STEP_TAG, "attempt") == "attempt":
                continue  # not a durable call (attempt records depend on the faults)
            value = codec.decode(p.value)
            if is_error_json(value):  # the stack differs between runs; the error does not
                value = (value["name"], value["message"])
            state = p.state if p.state != PromiseState.PENDING else "pending"
            outcome[p.id] = (str(state), value)
            steps[p.id] = p.tags.get(STEP_TAG, "")
            tags[p.id] = dict(p.tags)
        halted = [t.id for t in self.server.oracle.state.tasks if t.state == TaskState.HALTED]
        return Result(
            self.seed,
            self.faults,
            dict(sorted(outcome.items())),
            self.effects.ledger,
            self.server.settled,
            steps,
            self.sched.trace,
            dict(self.server.stats),
            error,
            dict(sorted(tags.items())),
            sorted(halted),
            list(self.wire.halts),
            sorted(w.pid for w in self.incarnations if w.redeployed),
            self.server.created,
        )


async def _run_on(app: Troth, root: Root) -> None:
    # Called inside the worker's task, so that what ``run`` starts belongs to the worker.
    await app.options(**root.options).run(root.id, root.fn, *root.args).done()
