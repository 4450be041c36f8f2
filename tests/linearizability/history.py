"""Recording a concurrent history: clients racing on a tiny pool of promises and tasks.

``record(target, seed)`` runs ``clients`` asyncio tasks in ``phases``. Every operation of a
phase uses the phase's instant as ``resonate:debug_time``; between two phases, with nothing
in flight, one ``debug.tick`` moves time on by ``PHASE`` ms and fires what came due. That is
the time discipline ``checker`` relies on: real-time order never sends ``now`` backwards.
Deadlines, leases and the retry timeout are a few phases long, so promises die (projection
and timeout transitions), leases lapse and pending tasks are re-offered during a run.

Clients share what they learn, as workers of one group would: the newest version seen of
each task and which client holds it, so most task requests name a plausible version and
races on the same version are common.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from typing import Any

from tests.linearizability.checker import Operation
from tests.linearizability.targets import Envelope, Target, envelope
from troth.protocol.ids import origin

START = 10_000
PHASE = 1_000  # ms of debug time between phases
RETRY_TIMEOUT = 1_500  # the backend's and the oracle's retryTimeout
FAMILIES = ("a", "b")
GENERATION = 2  # phases a family keeps its ids before moving to fresh ones
TARGET = "poll://any@workers"
TARGET_TAG = "resonate:target"
SETTLE_STATES = ("resolved", "rejected", "rejected_canceled")

Data = dict[str, Any]


@dataclass
class Knowledge:
    """What the clients have seen, shared between them (it only steers what they send)."""

    versions: dict[str, int] = field(default_factory=dict)  # task id -> newest version seen
    offers: set[str] = field(default_factory=set)  # tasks last seen pending
    holders: dict[str, tuple[int, int]] = field(default_factory=dict)  # id -> (client, version)

    def learn(self, request: Envelope, response: Envelope | None) -> None:
        if response is None:
            return
        data, kind, status = response["data"], request["kind"], response["head"]["status"]
        if not isinstance(data, dict):
            if kind in ("task.fulfill", "task.release", "task.suspend"):  # the claim was lost
                self.holders.pop(request["data"]["id"], None)
            return
        promise = data.get("promise")
        if kind == "promise.create" and _pending_task(promise):
            self.versions.setdefault(promise["id"], 0)
            self.offers.add(promise["id"])
        task = data.get("task")
        if isinstance(task, dict):
            id = task["id"]
            self.versions[id] = max(task["version"], self.versions.get(id, 0))
            if task["state"] == "pending":
                self.offers.add(id)
            else:
                self.offers.discard(id)
            if task["state"] == "acquired":
                self.holders[id] = (int(task["pid"][1:]), task["version"])
            else:
                self.holders.pop(id, None)
        if kind in ("task.release", "task.continue") and status == 200:
            self.offers.add(request["data"]["id"])
        if kind in ("task.fulfill", "task.release", "task.suspend") and status in (200, 300):
            self.holders.pop(request["data"]["id"], None)


def _pending_task(promise: Any) -> bool:
    """A pending targeted promise comes with a pending task."""
    return (
        isinstance(promise, dict)
        and promise["state"] == "pending"
        and TARGET_TAG in promise["tags"]
    )


class Client:
    """One client's random choices (seeded), given the shared knowledge and the phase's now."""

    def __init__(
        self, number: int, seed: int, knowledge: Knowledge, families: tuple[str, ...]
    ) -> None:
        self.number = number
        self.families = families
        self.pid = f"w{number}"
        self.rng = random.Random(f"{seed}/{number}")
        self.knowledge = knowledge
        self.serial = 0
        self.now = START
        makers = {
            "promise.create": (8, self._promise_create),
            "promise.get": (6, self._by_id),
            "promise.settle": (5, self._promise_settle),
            "promise.register_callback": (3, self._register_callback),
            "promise.register_listener": (2, self._register_listener),
            "task.create": (6, self._task_create),
            "task.acquire": (9, self._task_acquire),
            "task.get": (3, self._by_id),
            "task.heartbeat": (4, self._task_heartbeat),
            "task.fulfill": (6, self._task_fulfill),
            "task.release": (4, self._task_ref),
            "task.suspend": (5, self._task_suspend),
            "task.fence": (4, self._task_fence),
            "task.halt": (1, self._by_id),
            "task.continue": (1, self._by_id),
        }
        self.kinds = list(makers)
        self.weights = [w for w, _ in makers.values()]
        self.makers = {kind: make for kind, (_, make) in makers.items()}

    def next(self, now: int) -> Envelope:
        self.now = now
        self.serial += 1
        kind = self.rng.choices(self.kinds, self.weights)[0]
        return envelope(kind, self.makers[kind](), f"c{self.number}.{self.serial}", now)

    # -- choices -------------------------------------------------------------------------------

    def _ids(self) -> list[str]:
        """The pool: a root and two children per family, of the current generation and,
        since settled promises stay settled, sometimes of the previous one."""
        generation = (self.now - START) // (PHASE * GENERATION)
        if generation and self.rng.random() < 0.15:
            generation -= 1
        roots = [f"{family}{generation}" for family in self.families]
        return [i for root in roots for i in (root, f"{root}:1", f"{root}:2")]

    def _id(self) -> str:
        return self.rng.choice(self._ids())

    def _kin(self, id: str) -> str:
        """Another id of the same origin: multi-object requests must stay inside one."""
        family = {f"{origin(id)}{suffix}" for suffix in ("", ":1", ":2")} - {id}
        return self.rng.choice(sorted(family))

    def _held(self) -> str | None:
        """A task this client holds, else often one another client holds (to race it)."""
        holders = self.knowledge.holders
        mine = sorted(id for id, (c, _) in holders.items() if c == self.number)
        if mine and self.rng.random() < 0.8:
            return self.rng.choice(mine)
        return self.rng.choice(sorted(holders)) if holders and self.rng.random() < 0.5 else None

    def _version(self, id: str) -> int:
        holder = self.knowledge.holders.get(id)
        known = holder[1] if holder else self.knowledge.versions.get(id, 0)
        return known if self.rng.random() < 0.85 else max(0, known + self.rng.choice((-1, 1)))

    def _timeout_at(self) -> int:
        """Some die within a phase or two, some in the phase they are born, most never."""
        span = self.rng.choices((0, 600, 1_600, 2_600, 10**9), (1, 3, 3, 2, 8))[0]
        return self.now + span

    def _tags(self, targeted: bool) -> dict[str, str]:
        roll = self.rng.random()
        if targeted or roll < 0.55:
            return {TARGET_TAG: TARGET}
        return {"resonate:timer": "true"} if roll < 0.7 else {}

    def _create(self, id: str, targeted: bool = False) -> Data:
        tags = self._tags(targeted)
        return {"id": id, "timeoutAt": self._timeout_at(), "param": {}, "tags": tags}

    def _settle(self, id: str) -> Data:
        value = {"data": f"{self.pid}.{self.serial}"}
        return {"id": id, "state": self.rng.choice(SETTLE_STATES), "value": value}

    def _action(self, kind: str, data: Data) -> Data:
        return envelope(kind, data, f"c{self.number}.{self.serial}.a")

    # -- one maker per kind --------------------------------------------------------------------

    def _by_id(self) -> Data:
        return {"id": self._id()}

    def _promise_create(self) -> Data:
        return self._create(self._id())

    def _promise_settle(self) -> Data:
        return self._settle(self._id())

    def _register_callback(self) -> Data:
        awaiter = self._id()
        return {"awaited": self._kin(awaiter), "awaiter": awaiter}

    def _register_listener(self) -> Data:
        return {"awaited": self._id(), "address": f"poll://uni@watchers/{self.pid}"}

    def _task_create(self) -> Data:
        action = self._action("promise.create", self._create(self._id(), targeted=True))
        return {"pid": self.pid, "ttl": self._ttl(), "action": action}

    def _ttl(self) -> int:
        return self.rng.choice((700, 1_700, 60_000))

    def _task_acquire(self) -> Data:
        offers = sorted(self.knowledge.offers)
        id = self.rng.choice(offers) if offers and self.rng.random() < 0.8 else self._id()
        return {"id": id, "version": self._version(id), "pid": self.pid, "ttl": self._ttl()}

    def _task_ref(self) -> Data:
        id = self._held() or self._id()
        return {"id": id, "version": self._version(id)}

    def _task_heartbeat(self) -> Data:
        first = self._held() or self._id()
        ids = {first, *(i for i in (self._kin(first),) if self.rng.random() < 0.3)}
        tasks = [{"id": i, "version": self._version(i)} for i in sorted(ids)]
        return {"pid": self.pid, "tasks": tasks}

    def _task_fulfill(self) -> Data:
        data = self._task_ref()
        return {**data, "action": self._action("promise.settle", self._settle(data["id"]))}

    def _task_suspend(self) -> Data:
        data = self._task_ref()
        awaited = sorted({self._kin(data["id"]) for _ in range(self.rng.randint(1, 2))})
        callback = "promise.register_callback"
        actions = [self._action(callback, {"awaited": a, "awaiter": data["id"]}) for a in awaited]
        return {**data, "actions": actions}

    def _task_fence(self) -> Data:
        data = self._task_ref()
        other = self._kin(data["id"])
        if self.rng.random() < 0.5:
            return {**data, "action": self._action("promise.create", self._create(other))}
        return {**data, "action": self._action("promise.settle", self._settle(other))}


async def _timed(target: Target, client: int, request: Envelope) -> Operation:
    call = time.monotonic_ns()
    response = await target.call(client, request)
    ret = time.monotonic_ns() if response is not None else None
    return Operation(client, call, ret, request, response)


async def record(
    target: Target,
    seed: int,
    *,
    clients: int = 8,
    phases: int = 5,
    per_phase: int = 2,
    families: tuple[str, ...] = FAMILIES,
) -> list[Operation]:
    """``clients`` x ``phases`` x ``per_phase`` racing operations, and a tick between phases.

    Each family is an origin of three ids; one family makes every client race on the same
    three objects."""
    knowledge = Knowledge()
    racers = [Client(n, seed, knowledge, families) for n in range(clients)]
    history: list[Operation] = []

    async def run(client: Client, now: int) -> None:
        for _ in range(per_phase):
            op = await _timed(target, client.number, client.next(now))
            knowledge.learn(op.request, op.response)
            history.append(op)

    for phase in range(phases):
        now = START + phase * PHASE
        if phase:
            tick = envelope("debug.tick", {"time": now}, f"tick{phase}", now)
            history.append(await _timed(target, -1, tick))
        await asyncio.gather(*(run(client, now) for client in racers))
    return history
