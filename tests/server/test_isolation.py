"""Tenant isolation as a property (issue 34): a seeded random workload of scoped tenants and
an admin against ``troth serve --auth-publickey``, on SQLite and PostgreSQL, and nothing a
tenant is answered or streamed may hold what only someone else wrote.

Every value, param and tag written carries a marker naming the id it was written on
(``SECRET<id>``), so a leak is recognisable wherever it surfaces: a reply, a preload, a
nested fence reply, an error text, an SSE frame. The tenants:

- ``ta-`` and ``tb-``: prefixes of their own, each with its own poll group;
- ``tcr:1``: a token scoped to one subtree of the admin's root ``tcr``, whose branch holds
  siblings (``tcr:2``) the token may not read;
- the admin writes in every prefix and outside them all, and fires schedules (debug.tick).

Each tenant tries its own ids most of the time and the others' ids (and lineage tags naming
other roots) the rest: the attacks must fail, and no answer may carry another's data. An
answer may repeat what the request itself said (an error naming the id it refused).

``TROTH_ISOLATION_SEEDS=N`` runs more seeds (a longer, benchmark-style run); CI runs a few.
"""

from __future__ import annotations

import json
import os
import random
import re
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.servers import BACKENDS, FAR, VERSION, TrothServer, serve
from tests.support.sse import SseClient
from tests.support.tokens import AUD, ISS, Keys, token

pytestmark = pytest.mark.slow

SEEDS = range(int(os.environ.get("TROTH_ISOLATION_SEEDS", "3")))
STEPS = 120
LINEAGE = ("resonate:origin", "resonate:branch", "resonate:parent")
MARK = re.compile(r"SECRET<([^>]*)>")


def secret(id: str) -> str:
    return f"SECRET<{id}>"


class Actor:
    """One token's requests, with everything it was answered kept for the judge."""

    def __init__(self, server: TrothServer, name: str, prefix: str, bearer: str) -> None:
        self.server = server
        self.name = name
        self.prefix = prefix  # "" for the admin
        self.bearer = bearer
        self.answers: list[tuple[str, str]] = []  # (request text, answer text)
        self.frames: list[str] = []
        self.tasks: dict[str, int] = {}  # task id -> version last seen

    def call(self, kind: str, data: dict[str, Any]) -> tuple[int, Any]:
        body = {"kind": kind, "head": {"corrId": uuid.uuid4().hex, "version": VERSION}}
        body["data"] = data
        headers = {"Authorization": f"Bearer {self.bearer}"}
        response = self.server.http.post("/", json=body, headers=headers)
        assert response.status_code < 500, (kind, data, response.text)
        self.answers.append((json.dumps(body), response.text))
        answer = response.json()
        return response.status_code, answer["data"]

    @property
    def group(self) -> str:
        return f"{self.prefix}g"

    def listen(self, stop: threading.Event) -> threading.Thread:
        """Collect every frame of the actor's own poll group until ``stop``."""
        stream = SseClient(self.server.port, self.group, "w1", token=self.bearer)
        assert stream.status == 200

        def read() -> None:
            while not stop.is_set():
                try:
                    frame = stream.message(timeout=0.2)
                except (TimeoutError, OSError):
                    continue
                self.frames.append(json.dumps(frame))
                if frame["kind"] == "execute":
                    task = frame["data"]["task"]
                    self.tasks[task["id"]] = task["version"]

        thread = threading.Thread(target=read, daemon=True)
        thread.start()
        return thread


class Workload:
    """The seeded steps: each picks an actor, a kind and ids, mostly its own."""

    def __init__(self, rng: random.Random, actors: list[Actor], admin: Actor) -> None:
        self.rng = rng
        self.actors = actors
        self.admin = admin
        self.roots = {a.name: [f"{a.prefix}r{i}" for i in range(3)] for a in actors}
        self.roots["subtree"] = ["tcr:1"]
        self.roots["admin"] = ["adm-r0", "tcr"]
        self.ids: dict[str, list[str]] = {name: list(rs) for name, rs in self.roots.items()}
        self.schedules = 0

    def own_root(self, actor: Actor) -> str:
        return self.rng.choice(self.roots[actor.name])

    def some_id(self, actor: Actor) -> str:
        """An id of the actor's most of the time; a quarter of the time anyone's."""
        if self.rng.random() < 0.75:
            return self.rng.choice(self.ids[actor.name])
        return self.rng.choice(self.rng.choice(list(self.ids.values())))

    def new_id(self, actor: Actor) -> tuple[str, dict[str, str]]:
        """A fresh root, or a child of a root (its lineage tags naming the root), and now
        and then tags naming another root: the attack promise.create must refuse."""
        root = self.own_root(actor)
        if actor.name == "subtree":
            id, ancestor = f"tcr:1.{self.rng.randrange(1000)}", "tcr"
        elif self.rng.random() < 0.3:
            return f"{actor.prefix}n{self.rng.randrange(10**6)}", {}
        else:
            id, ancestor = f"{root}:{self.rng.randrange(1000)}", root
        if self.rng.random() < 0.15:
            ancestor = self.rng.choice(self.rng.choice(list(self.roots.values())))
        return id, dict.fromkeys(self.rng.sample(LINEAGE, self.rng.randint(1, 3)), ancestor)

    def step(self) -> None:
        actor = self.rng.choice([*self.actors, self.admin])
        kind = self.rng.choice(
            (
                "create",
                "create",
                "settle",
                "get",
                "callback",
                "listener",
                "acquire",
                "fence",
                "fences",
                "suspend",
                "fulfill",
                "release",
                "heartbeat",
                "schedule",
                "tick",
            )
        )
        getattr(self, kind)(actor)

    def _tags(self, actor: Actor, id: str, tags: dict[str, str]) -> dict[str, str]:
        tags = {**tags, "mark": secret(id)}
        if actor.name not in ("subtree", "admin") and self.rng.random() < 0.5:
            tags["resonate:target"] = f"poll://any@{actor.group}"
        return tags

    def create(self, actor: Actor) -> None:
        id, tags = self.new_id(actor)
        data = {"id": id, "timeoutAt": FAR, "param": {"data": secret(id)}}
        data["tags"] = self._tags(actor, id, tags)
        if actor.call("promise.create", data)[0] == 200:
            self.ids[actor.name].append(id)

    def settle(self, actor: Actor) -> None:
        id = self.some_id(actor)
        state = self.rng.choice(("resolved", "rejected"))
        actor.call("promise.settle", {"id": id, "state": state, "value": {"data": secret(id)}})

    def get(self, actor: Actor) -> None:
        kind = self.rng.choice(("promise.get", "task.get", "schedule.get"))
        actor.call(kind, {"id": self.some_id(actor)})

    def callback(self, actor: Actor) -> None:
        awaited, awaiter = self.some_id(actor), self.some_id(actor)
        actor.call("promise.register_callback", {"awaited": awaited, "awaiter": awaiter})

    def listener(self, actor: Actor) -> None:
        address = f"poll://any@{actor.group}" if actor.prefix else "poll://any@admin-g"
        actor.call(
            "promise.register_listener", {"awaited": self.some_id(actor), "address": address}
        )

    def _task(self, actor: Actor) -> tuple[str, int]:
        if actor.tasks and self.rng.random() < 0.8:
            id = self.rng.choice(list(actor.tasks))
            return id, actor.tasks[id]
        return self.some_id(actor), self.rng.randrange(3)

    def acquire(self, actor: Actor) -> None:
        id, version = self._task(actor)
        data = {"id": id, "version": version, "pid": actor.name, "ttl": 60_000}
        status, body = actor.call("task.acquire", data)
        if status == 200:
            actor.tasks[id] = body["task"]["version"]

    def _action(self, actor: Actor, task: str) -> dict[str, Any]:
        if self.rng.random() < 0.5:
            child = f"{task}.{self.rng.randrange(100)}"
            tags = dict.fromkeys(LINEAGE[:2], task.split(":")[0]) if ":" in task else {}
            data = {"id": child, "timeoutAt": FAR, "param": {"data": secret(child)}, "tags": tags}
            self.ids[actor.name].append(child)
            return {
                "kind": "promise.create",
                "head": {"corrId": "f", "version": VERSION},
                "data": data,
            }
        id = self.some_id(actor)
        data = {"id": id, "state": "resolved", "value": {"data": secret(id)}}
        return {"kind": "promise.settle", "head": {"corrId": "f", "version": VERSION}, "data": data}

    def fence(self, actor: Actor) -> None:
        id, version = self._task(actor)
        actor.call("task.fence", {"id": id, "version": version, "action": self._action(actor, id)})

    def fences(self, actor: Actor) -> None:
        id, version = self._task(actor)
        actions = [self._action(actor, id) for _ in range(self.rng.randint(1, 3))]
        actor.call("task.fences", {"id": id, "version": version, "actions": actions})

    def suspend(self, actor: Actor) -> None:
        id, version = self._task(actor)
        awaited = self.some_id(actor)
        callback = {"awaited": awaited, "awaiter": id}
        action = {
            "kind": "promise.register_callback",
            "head": {"corrId": "s", "version": VERSION},
            "data": callback,
        }
        actor.call("task.suspend", {"id": id, "version": version, "actions": [action]})

    def fulfill(self, actor: Actor) -> None:
        id, version = self._task(actor)
        settle = {"id": id, "state": "resolved", "value": {"data": secret(id)}}
        action = {"kind": "promise.settle", "head": {"corrId": "u", "version": VERSION}}
        action["data"] = settle
        actor.call("task.fulfill", {"id": id, "version": version, "action": action})

    def release(self, actor: Actor) -> None:
        id, version = self._task(actor)
        kind = self.rng.choice(("task.release", "task.halt", "task.continue"))
        data: dict[str, Any] = {"id": id}
        if kind == "task.release":
            data["version"] = version
        actor.call(kind, data)

    def heartbeat(self, actor: Actor) -> None:
        id, version = self._task(actor)
        actor.call("task.heartbeat", {"pid": actor.name, "tasks": [{"id": id, "version": version}]})

    def schedule(self, actor: Actor) -> None:
        """A schedule firing every second into the actor's group, its lineage tags naming
        its own fired ids, or (a third of the time) another root: refused."""
        self.schedules += 1
        id = f"{actor.prefix or 'adm-'}s{self.schedules}"
        root = f"{id}r"
        ancestor = root if self.rng.random() < 0.66 else self.rng.choice(self.roots["admin"])
        tags = dict.fromkeys(self.rng.sample(LINEAGE, self.rng.randint(1, 3)), ancestor)
        group = actor.group if actor.prefix else "admin-g"
        tags |= {"resonate:target": f"poll://any@{group}", "mark": secret(id)}
        data = {
            "id": id,
            "cron": "* * * * * *",
            "promiseId": root + ":{{.timestamp}}",
            "promiseTimeout": 60_000,
            "promiseParam": {"data": secret(id)},
            "promiseTags": tags,
        }
        if actor.call("schedule.create", data)[0] == 200:
            self.ids[actor.name].append(id)

    def tick(self, actor: Actor) -> None:
        del actor  # only the admin may tick: schedules fire, leases and retries time out
        now = int(time.time() * 1000) + self.rng.randrange(1, 120) * 1000
        self.admin.call("debug.tick", {"time": now})


def leaks(actor: Actor) -> list[str]:
    """What ``actor`` was sent that it may not read: a marker, or an id field, of another
    scope that its own request did not name."""
    found = []
    for request, answer in [*actor.answers, *(("", frame) for frame in actor.frames)]:
        for named in MARK.findall(answer):
            if not named.startswith(actor.prefix) and secret(named) not in request:
                found.append(f"{secret(named)} in {answer[:300]}")
        for field in re.findall(r'"(?:id|awaited|awaiter)":"([^"]*)"', answer):
            if not field.startswith(actor.prefix) and field not in request:
                found.append(f"id {field!r} in {answer[:300]}")
    return found


@pytest.fixture(scope="module", params=BACKENDS)
def secured(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, keys: Keys
) -> Iterator[TrothServer]:
    flags = ("--auth-publickey", keys.paths["rsa"], "--auth-iss", ISS, "--auth-aud", AUD)
    with serve(request.param, tmp_path_factory.mktemp("isolation"), *flags) as server:
        yield server


@pytest.mark.parametrize("seed", SEEDS)
def test_no_tenant_is_sent_what_only_another_wrote(
    secured: TrothServer, keys: Keys, seed: int
) -> None:
    run = f"{seed}x{uuid.uuid4().hex[:4]}"  # the server is shared by the seeds
    admin = Actor(secured, "admin", "", token(keys.rsa, role="admin"))
    admin.call("debug.reset", {})
    actors = [Actor(secured, name, f"t{name[-1]}{run}-", "") for name in ("tenant-a", "tenant-b")]
    for actor in actors:
        actor.bearer = token(keys.rsa, prefix=actor.prefix)
    subtree = Actor(secured, "subtree", "tcr:1", token(keys.rsa, prefix="tcr:1"))
    actors.append(subtree)
    rng = random.Random(seed)
    workload = Workload(rng, actors, admin)
    # The admin's root with a settled secret sibling of the subtree tenant's task, and the
    # task itself: what the subtree tenant acquires must not carry ``tcr:2``.
    branch = dict.fromkeys(LINEAGE, "tcr")
    for id, tags in (
        ("tcr", {}),
        ("tcr:2", branch),
        ("tcr:1", {**branch, "resonate:target": "poll://any@admin-g"}),
    ):
        admin.call(
            "promise.create", {"id": id, "timeoutAt": FAR, "tags": {**tags, "mark": secret(id)}}
        )
    admin.call(
        "promise.settle", {"id": "tcr:2", "state": "resolved", "value": {"data": secret("tcr:2")}}
    )
    stop = threading.Event()
    readers = [actor.listen(stop) for actor in actors[:2]]
    try:
        # The claim whose branch holds a sibling out of scope:
        subtree.call("task.acquire", {"id": "tcr:1", "version": 0, "pid": "c", "ttl": 60_000})
        for _ in range(STEPS):
            workload.step()
    finally:
        time.sleep(0.3)  # the last frames
        stop.set()
        for reader in readers:
            reader.join(timeout=5)
    for actor in actors:
        assert leaks(actor) == [], actor.name
    # The workload reached what it is about: tenants were answered, and streamed, at all.
    assert all(any('"status":200' in a for _, a in actor.answers) for actor in actors)
    assert sum(len(actor.frames) for actor in actors) > 0
    claim = subtree.answers[0][1]
    assert '"status":200' in claim and '"preload":[]' in claim, claim  # tcr:2 was cut
