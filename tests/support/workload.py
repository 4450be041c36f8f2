"""A seeded random stream of request envelopes, for the oracle and later the real server.

``Workload(seed)`` is an iterator of request envelopes; after sending each one, tell it the
response with ``observe(envelope, response)``. It learns task versions and lease holders
the way a worker would (from task records in responses and from the executes a
``debug.snap`` shows), so most task requests carry a plausible version or pid and some a
stale one.

What it aims for, so that every handler path is reached:

- a small pool of colliding ids: three families of a root and two children (``a0``,
  ``a0:1``, ``a0:2``, as ids are ``<origin>:<lineage>``); children share their root's
  origin, so callbacks and suspensions pass the same-origin door, and ``resonate:branch``
  tags make preloads non-trivial. Now and then a family moves to a new generation (``a1``,
  ...), since settled ids are settled for good; the previous generation stays reachable for
  stale requests;
- worker-like task traffic: acquire what the outbox offered, at the offered version, and
  act on what it holds (release, fulfil, suspend, fence, heartbeat, and troth's batch of
  fences, ``task.fences``: often a step's create and settle, as troth's SDK sends them);
- promises that are targeted, timers, both, plain (internal), delayed, born dead, or with
  deadlines from milliseconds to minutes;
- schedules with second-level (6-field) crons, so they fire within a run;
- mostly valid requests, with about one in twenty broken on purpose (a 400);
- time that never goes back: usually a step of 0-50 ms, sometimes seconds, rarely minutes;
  ``debug.tick`` fires due timeouts at the current instant.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from typing import Any

from tests.support.fences import as_fences
from troth.protocol.ids import LINEAGE_SEP, ORIGIN_SEP, child_id, origin
from troth.protocol.limits import MAX_FENCES
from troth.protocol.records import BRANCH, DELAY, ORIGIN, PARENT, TARGET, TIMER

VERSION = "2026-04-01"
START = 1_700_000_000_000  # a realistic epoch instant (ms), so crons see real dates

FAMILIES = ("a", "b", "c")
GHOSTS = ("z", "a0:9")  # never created: for 404s
SCHEDULES = ("s1", "s2")
PIDS = ("w1", "w2")
MAX_OFFERS = 8
WORK = (
    "task.suspend",
    "task.fulfill",
    "task.fence",
    "task.release",
    "task.heartbeat",
    "task.fences",
)
LETS_GO = ("task.release", "task.suspend", "task.fulfill", "task.fence")

ADDRESSES = ("poll://any@g", "poll://any@g/w1", "poll://uni@g/w2", "http://localhost:9/hook")
BAD_ADDRESSES = ("mailto:x@y", "poll://uni@g", "g")
CRONS = ("*/10 * * * * *", "*/30 * * * * *", "0 * * * * *", "30 */2 * * * *")
SETTLE_STATES = ("resolved", "rejected", "rejected_canceled")

Envelope = dict[str, Any]
Data = dict[str, Any]


class Workload(Iterator[Envelope]):
    """An endless, reproducible request stream; ``now`` is the instant of the last request."""

    def __init__(self, seed: int, start: int = START) -> None:
        self.rng = random.Random(seed)
        self.now = start
        self.serial = 0
        self.versions: dict[str, int] = {}  # task id -> newest version seen
        self.holders: dict[str, str] = {}  # task id -> pid of our last acquisition
        self.offers: dict[str, int] = {}  # task id -> version, of the latest executes
        self.outbox: set[tuple[str, str, int]] = set()  # executes in the last snapshot
        self.generations = dict.fromkeys(FAMILIES, 0)
        self.deadlines: dict[str, int] = {}  # promise id -> timeoutAt, while seen pending
        self.awaited: set[str] = set()  # promises a suspension of ours waits on
        self.known: set[str] = set()  # promise ids some response showed
        kinds: dict[str, tuple[float, Callable[[], Data]]] = {
            "promise.get": (3, self._by_id),
            "promise.create": (12, self._promise_create),
            "promise.settle": (5, self._promise_settle),
            "promise.register_callback": (6, self._register_callback),
            "promise.register_listener": (4, self._register_listener),
            "promise.search": (1, self._search),
            "task.get": (3, self._by_id),
            "task.create": (7, self._task_create),
            "task.acquire": (9, self._task_acquire),
            "task.release": (4, self._task_ref),
            "task.fulfill": (6, self._task_fulfill),
            "task.suspend": (9, self._task_suspend),
            "task.fence": (6, self._task_fence),
            "task.fences": (5, self._task_fences),
            "task.heartbeat": (4, self._task_heartbeat),
            "task.halt": (3, self._by_id),
            "task.continue": (3, self._by_id),
            "task.search": (1, self._search),
            "schedule.get": (1, self._schedule_id),
            "schedule.create": (2, self._schedule_create),
            "schedule.delete": (2, self._schedule_id),
            "schedule.search": (1, self._search),
            "debug.tick": (10, self._tick),
        }
        self.kinds = list(kinds)
        self.weights = [w for w, _ in kinds.values()]
        self.makers = {kind: make for kind, (_, make) in kinds.items()}

    # -- the stream ---------------------------------------------------------------------------

    def __next__(self) -> Envelope:
        self._advance()
        if self.holders and self._chance(0.25):
            # A worker holding a task gets on with it, suspending most often.
            self.kind = self.rng.choices(WORK, (4, 2, 2, 1, 1, 2))[0]
        else:
            self.kind = self.rng.choices(self.kinds, self.weights)[0]
        self.broken = self.rng.random() < 0.05  # this request should earn a 400
        data = self.makers[self.kind]()
        return self.envelope(self.kind, data)

    def envelope(self, kind: str, data: Data) -> Envelope:
        self.serial += 1
        head = {"corrId": f"c{self.serial}", "version": VERSION, "resonate:debug_time": self.now}
        return {"kind": kind, "head": head, "data": data}

    def snap_request(self) -> Envelope:
        """A ``debug.snap`` at the current instant (not part of the random stream)."""
        return self.envelope("debug.snap", {})

    def observe(self, envelope: Envelope, response: Envelope) -> None:
        """Learn versions and lease holders from a response, as a worker would."""
        kind, status = envelope["kind"], response["head"]["status"]
        if kind == "task.fences" and status == 200:
            # Each fence's answer is a task.fence response: learnt as if sent alone.
            for fence, answer in zip(as_fences(envelope), response["data"]["fences"], strict=True):
                self.observe(fence, answer)
            return
        if kind == "task.suspend" and status == 200:
            self.awaited.update(a["data"]["awaited"] for a in envelope["data"]["actions"])
        if kind in LETS_GO and (status in (404, 409) or (status == 200 and kind != "task.fence")):
            # Released, suspended, fulfilled, or the claim was lost: no longer held.
            self.holders.pop(envelope["data"]["id"], None)
        if kind == "task.acquire" and status != 400:
            self.offers.pop(envelope["data"]["id"], None)
        data = response.get("data")
        if not isinstance(data, dict):
            return
        if kind == "debug.snap":
            self._deliver(data["messages"])
            return
        inner = data.get("action")  # a fence answers with the inner response
        for answer in (data, inner.get("data") if isinstance(inner, dict) else None):
            promise = answer.get("promise") if isinstance(answer, dict) else None
            if isinstance(promise, dict):
                self._promise_seen(promise)
        task = data.get("task")
        if isinstance(task, dict):
            self._saw(task["id"], task["version"])
            if task["state"] == "acquired":
                self.holders[task["id"]] = task["pid"]
                self.offers.pop(task["id"], None)
            else:
                self.holders.pop(task["id"], None)

    def _deliver(self, messages: list[dict[str, Any]]) -> None:
        """Take the executes a snapshot shows for the first time as offers, as if delivered.

        The oracle never empties its outbox, so an execute counts as delivered when it first
        appears (or changes); a worker keeps only the few most recent offers.
        """
        # A dict keeps the snapshot's order: iterating a set of strings would depend on
        # PYTHONHASHSEED, and a seed must replay the same stream in every process.
        outbox: dict[tuple[str, str, int], None] = {}
        for entry in messages:
            if entry["message"]["kind"] == "execute":
                task = entry["message"]["data"]["task"]
                outbox[entry["address"], task["id"], task["version"]] = None
        for _, id, version in (e for e in outbox if e not in self.outbox):
            self._saw(id, version)
            self.offers.pop(id, None)
            self.offers[id] = version
        self.outbox = set(outbox)
        while len(self.offers) > MAX_OFFERS:
            del self.offers[next(iter(self.offers))]

    def _promise_seen(self, promise: dict[str, Any]) -> None:
        self.known.add(promise["id"])
        if promise["state"] == "pending":
            self.deadlines[promise["id"]] = promise["timeoutAt"]
        else:
            self.deadlines.pop(promise["id"], None)
            self.awaited.discard(promise["id"])

    def _saw(self, id: str, version: int) -> None:
        self.versions[id] = max(version, self.versions.get(id, 0))

    def _advance(self) -> None:
        if self._chance(1 / 40):
            self.generations[self.rng.choice(FAMILIES)] += 1
        roll = self.rng.random()
        if roll < 0.35:
            return
        if roll < 0.85:
            self.now += self.rng.randint(0, 50)
        elif roll < 0.95:
            self.now += self.rng.randint(1_000, 10_000)
        elif roll < 0.997:
            self.now += self.rng.randint(10_000, 40_000)
        else:
            self.now += self.rng.randint(60_000, 180_000)

    # -- choosing ids, versions, values -------------------------------------------------------

    def _chance(self, p: float) -> bool:
        return self.rng.random() < p

    def _id(self) -> str:
        """An id of a family's current generation, sometimes of the previous one or a ghost."""
        roll = self.rng.random()
        if roll < 0.04:
            return self.rng.choice(GHOSTS)
        family = self.rng.choice(FAMILIES)
        generation = self.generations[family] - (roll < 0.12)
        return self.rng.choice(family_ids(f"{family}{max(0, generation)}"))

    def _kin(self, id: str) -> str:
        """Another id of the same origin (the root, or a child), preferably one still live."""
        kin = [i for i in family_ids(origin(id)) if i != id]
        live = [i for i in kin if self.deadlines.get(i, 0) > self.now]
        existing = [i for i in kin if i in self.known]
        for pool, chance in ((live, 0.8), (existing, 0.7)):
            if pool and self._chance(chance):
                return self.rng.choice(pool)
        return self.rng.choice(kin)

    def _task_id(self) -> str:
        """For task requests: what a worker was offered or holds, else any id."""
        pools = [list(self.offers) if self.kind == "task.acquire" else list(self.holders)]
        pools.append(list(self.versions))  # tasks learned from the outbox (schedule-born too)
        for pool, chance in zip(pools, (0.85, 0.2), strict=True):
            if pool and self._chance(chance):
                return self.rng.choice(pool)
        return self._id()

    def _version(self, id: str) -> int:
        known = self.offers.get(id, self.versions.get(id, 0))
        roll = self.rng.random()
        if roll < 0.8:
            return known
        return max(0, known + self.rng.choice((-1, 1, 2)))

    def _value(self) -> Data:
        return self.rng.choice(({}, {"data": "eyJvayI6MX0="}, {"headers": {"h": "1"}}))

    def _timeout_at(self) -> int:
        """Mostly deadlines that outlive a few steps; some born dead or about to die."""
        span = self.rng.choices(
            (
                -self.rng.randint(1, 5_000),  # born dead
                0,  # dead at birth: the deadline is exclusive
                self.rng.randint(1, 100),
                self.rng.randint(100, 5_000),
                self.rng.randint(5_000, 60_000),
                self.rng.randint(60_000, 900_000),
            ),
            (5, 3, 7, 15, 35, 35),
        )[0]
        return max(0, self.now + span)

    def _tags(self, id: str, *, targeted: bool | None = None) -> dict[str, str]:
        tags: dict[str, str] = {}
        shape = self.rng.choice(("target", "target", "target", "timer", "both", "plain"))
        if targeted is True or (targeted is None and shape in ("target", "both")):
            tags[TARGET] = self.rng.choice(ADDRESSES)
        if targeted is None and shape in ("timer", "both"):
            tags[TIMER] = "true"
        if self._chance(0.6):
            tags[BRANCH] = origin(id)
        if self._chance(0.3):
            tags[ORIGIN] = origin(id)
        if ORIGIN_SEP in id and self._chance(0.3):
            tags[PARENT] = parent_id(id)
        return tags

    def _create_data(self, id: str, *, targeted: bool | None = None, delay: bool = True) -> Data:
        timeout_at = self._timeout_at()
        tags = self._tags(id, targeted=targeted)
        if delay and TARGET in tags and timeout_at > self.now + 1 and self._chance(0.2):
            tags[DELAY] = str(self.rng.randint(self.now, min(timeout_at - 1, self.now + 20_000)))
        data: Data = {"id": id, "timeoutAt": timeout_at, "tags": tags}
        if self._chance(0.5):
            data["param"] = self._value()
        return data

    def _action(self, kind: str, data: Data) -> Data:
        return {
            "kind": kind,
            "head": {"corrId": f"a{self.serial}", "version": VERSION},
            "data": data,
        }

    # -- one maker per kind: valid data, or (when ``self.broken``) data that earns a 400 --------

    def _by_id(self) -> Data:
        return {"id": "" if self.broken else self._id()}

    def _fresh_id(self) -> str:
        """For creations: mostly an id of a current generation not created yet."""
        fresh = [
            i
            for family, generation in self.generations.items()
            for i in family_ids(f"{family}{generation}")
            if i not in self.known
        ]
        return self.rng.choice(fresh) if fresh and self._chance(0.6) else self._id()

    def _promise_create(self) -> Data:
        id = self._fresh_id()
        data = self._create_data(id)
        if self.broken:
            breakage = self.rng.choice(("delay-untargeted", "bad-target", "origin", "negative"))
            if breakage == "delay-untargeted":
                data["tags"] = {DELAY: str(self.now)}
                data["timeoutAt"] = self.now + 1000
            elif breakage == "bad-target":
                data["tags"][TARGET] = self.rng.choice(BAD_ADDRESSES)
            elif breakage == "origin":
                data["tags"][ORIGIN] = "q"
            else:
                data["timeoutAt"] = -1
        return data

    def _promise_settle(self) -> Data:
        state = self.rng.choice(SETTLE_STATES)
        if self.broken:
            state = self.rng.choice(("pending", "rejected_timedout", "done"))
        # Often the promise a suspended task waits on, as the process doing that work would.
        awaited = sorted(self.awaited)
        id = self.rng.choice(awaited) if awaited and self._chance(0.5) else self._id()
        return {"id": id, "state": state, "value": self._value()}

    def _register_callback(self) -> Data:
        awaiter = self._id()
        awaited = self._kin(awaiter)
        if self.broken:
            awaited = self.rng.choice((awaiter, "q:1"))  # self, or another origin
        return {"awaited": awaited, "awaiter": awaiter}

    def _register_listener(self) -> Data:
        addresses = BAD_ADDRESSES if self.broken else ADDRESSES
        return {"awaited": self._id(), "address": self.rng.choice(addresses)}

    def _search(self) -> Data:
        data: Data = {}
        if self.kind == "promise.search" and self._chance(0.5):
            data["state"] = self.rng.choice(("pending", "resolved", "rejected_timedout"))
        if self.kind == "task.search" and self._chance(0.5):
            data["state"] = self.rng.choice(("pending", "acquired", "suspended", "fulfilled"))
        if self.kind != "task.search" and self._chance(0.3):
            data["tags"] = {TARGET: ADDRESSES[0]}
        if self._chance(0.5):
            data["limit"] = 0 if self.broken else self.rng.randint(1, 5)
        elif self.broken:
            data["limit"] = 5000
        return data

    def _task_create(self) -> Data:
        id = self._fresh_id()
        action = self._action("promise.create", self._create_data(id, targeted=True, delay=False))
        data: Data = {"pid": self.rng.choice(PIDS), "ttl": self._ttl(), "action": action}
        if self.broken:
            if self._chance(0.5):
                data["ttl"] = 0
            else:
                del action["data"]["tags"][TARGET]
        return data

    def _ttl(self) -> int:
        return self.rng.choice((200, 1_000, 5_000, 30_000))

    def _task_acquire(self) -> Data:
        id = self._task_id()
        data: Data = {"id": id, "version": self._version(id), "pid": self.rng.choice(PIDS)}
        data["ttl"] = 0 if self.broken else self._ttl()
        return data

    def _task_ref(self) -> Data:
        id = self._task_id()
        return {"id": id, "version": -1 if self.broken else self._version(id)}

    def _task_fulfill(self) -> Data:
        data = self._task_ref()
        settle = {"id": data["id"], "state": self.rng.choice(SETTLE_STATES), "value": {}}
        if self.broken:
            data["version"] = max(0, data["version"])
            if self._chance(0.5):
                settle["id"] = self._kin(data["id"])  # fulfil must name the task's promise
            else:
                settle["state"] = "rejected_timedout"  # the server's verdict, not a client's
        data["action"] = self._action("promise.settle", settle)
        return data

    def _task_suspend(self) -> Data:
        data = self._task_ref()
        id = data["id"]
        awaited = [self._kin(id) for _ in range(self.rng.randint(1, 2))]
        if self.broken:
            data["version"] = max(0, data["version"])
            awaited = self.rng.choice(([], [id], ["q:1"]))
        data["actions"] = [
            self._action("promise.register_callback", {"awaited": a, "awaiter": id})
            for a in awaited
        ]
        return data

    def _task_fence(self) -> Data:
        data = self._task_ref()
        id = data["id"]
        other = self._kin(id)
        if self.broken:
            data["version"] = max(0, data["version"])
            other = id
        data["action"] = self._fence_action(other)
        return data

    def _task_fences(self) -> Data:
        """One to four fences at one version, a pair creating and settling one promise (a
        troth step) half the time; the broken ones empty, too long, fencing the task's own
        promise, or naming an action kind a fence does not take."""
        data = self._task_ref()
        id = data["id"]
        if self._chance(0.5):
            step = self._kin(id)
            settle = {"id": step, "state": self.rng.choice(SETTLE_STATES), "value": self._value()}
            actions = [
                self._action("promise.create", self._create_data(step)),
                self._action("promise.settle", settle),
            ]
        else:
            count = self.rng.randint(1, 4)
            actions = [self._fence_action(self._kin(id)) for _ in range(count)]
        if self.broken:
            data["version"] = max(0, data["version"])
            breakage = self.rng.choice(("empty", "long", "self", "kind"))
            if breakage == "empty":
                actions = []
            elif breakage == "long":
                actions = actions[:1] * (MAX_FENCES + 1)
            elif breakage == "self":
                actions.append(self._action("promise.settle", {"id": id, "state": "resolved"}))
            else:
                actions.insert(0, self._action("promise.get", {"id": self._kin(id)}))
        data["actions"] = actions
        return data

    def _fence_action(self, other: str) -> Data:
        """A fenced create or settle of ``other``."""
        if self._chance(0.5):
            return self._action("promise.create", self._create_data(other))
        settle = {"id": other, "state": self.rng.choice(SETTLE_STATES), "value": {}}
        return self._action("promise.settle", settle)

    def _task_heartbeat(self) -> Data:
        ids = list(dict.fromkeys(self._task_id() for _ in range(self.rng.randint(0, 3))))
        pid = self.rng.choice(PIDS)
        if ids and self._chance(0.7):
            pid = self.holders.get(ids[0], pid)
        tasks = [{"id": i, "version": self._version(i)} for i in ids]
        if self.broken:
            tasks.append({"id": "a", "version": -5})
        return {"pid": pid, "tasks": tasks}

    def _schedule_id(self) -> Data:
        return {"id": "" if self.broken else self.rng.choice((*SCHEDULES, "s9"))}

    def _schedule_create(self) -> Data:
        id = self.rng.choice(SCHEDULES)
        tags = {TARGET: self.rng.choice(ADDRESSES)}
        if self._chance(0.2):
            tags[TIMER] = "true"
        data: Data = {
            "id": id,
            "cron": self.rng.choice(CRONS),
            # A fixed id is adopted by later occurrences; a timestamped one makes a new promise.
            "promiseId": self.rng.choice(("{{.id}}", "{{.id}}", "{{.id}}.{{.timestamp}}")),
            "promiseTimeout": self.rng.choice((0, 1_000, 10_000, 60_000)),
            "promiseTags": tags,
        }
        if self.broken:
            breakage = self.rng.choice(("cron", "id", "target"))
            if breakage == "cron":
                data["cron"] = "every day"
            elif breakage == "id":
                data["id"] = "s:1"  # ':' is reserved in schedule ids
            else:
                del tags[TARGET]
        return data

    def _tick(self) -> Data:
        return {"time": -1 if self.broken else self.now}


def family_ids(root: str) -> tuple[str, str, str]:
    return (root, child_id(root, "1"), child_id(root, "2"))


def parent_id(id: str) -> str:
    """The id one level up: ``r:1.2 -> r:1 -> r`` (for a child id only)."""
    lineage = id.split(ORIGIN_SEP, 1)[1]
    if LINEAGE_SEP in lineage:
        return id.rsplit(LINEAGE_SEP, 1)[0]
    return origin(id)
