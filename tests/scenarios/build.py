"""Building blocks for scenarios: request envelopes, setup steps and expected wire values.

A scenario drives any ``m`` with ``m.apply(envelope) -> response envelope`` (the oracle, the
engine, a live server in debug mode), so everything here speaks JSON-shaped dicts. Every
request carries ``resonate:debug_time``: time is always explicit.

The expected values a scenario asserts are worked out from the Lean text by hand; the
helpers below only spell records the way the wire does (absent optionals omitted).
"""

from __future__ import annotations

from typing import Any, Protocol

VERSION = "2026-04-01"

R = 5000  # the retry timeout the scenarios assume: Lean's and troth's default
W = "poll://any@workers"  # the target of every targeted promise
L1 = "poll://uni@clients/c1"  # listener addresses
L2 = "poll://uni@clients/c2"
PID = "worker-1"
TTL = 10_000
TARGETED = {"resonate:target": W}
TIMER = {"resonate:timer": "true"}


class Machine(Protocol):
    def apply(self, envelope: dict[str, Any]) -> dict[str, Any]: ...


# -- sending --------------------------------------------------------------------------------


def envelope(kind: str, data: dict[str, Any], now: int | None = None) -> dict[str, Any]:
    head: dict[str, Any] = {"corrId": f"sc-{kind}", "version": VERSION}
    if now is not None:
        head["resonate:debug_time"] = now
    return {"kind": kind, "head": head, "data": data}


def call(m: Machine, kind: str, data: dict[str, Any], now: int) -> tuple[int, Any]:
    """Send one request; answer its status and data, after checking the envelope echoes."""
    response = m.apply(envelope(kind, data, now))
    assert response["kind"] == kind
    assert response["head"]["corrId"] == f"sc-{kind}"
    return response["head"]["status"], response["data"]


def ok(m: Machine, kind: str, data: dict[str, Any], now: int) -> Any:
    status, body = call(m, kind, data, now)
    assert status == 200, (kind, status, body)
    return body


def status(m: Machine, kind: str, data: dict[str, Any], now: int) -> int:
    return call(m, kind, data, now)[0]


def snap(m: Machine) -> dict[str, Any]:
    response = m.apply(envelope("debug.snap", {}))
    assert response["head"]["status"] == 200
    return response["data"]


def tick(m: Machine, time: int) -> None:
    assert ok(m, "debug.tick", {"time": time}, time) == []


# -- request data ---------------------------------------------------------------------------


def create(
    id: str,
    timeout_at: int,
    tags: dict[str, str] | None = None,
    param: dict[str, Any] | None = None,
) -> dict[str, Any]:
    data: dict[str, Any] = {"id": id, "timeoutAt": timeout_at, "tags": tags or {}}
    if param is not None:
        data["param"] = param
    return data


def settle(id: str, state: str = "resolved", value: dict[str, Any] | None = None) -> dict:
    return {"id": id, "state": state, "value": value or {}}


def callback(awaited: str, awaiter: str) -> dict[str, Any]:
    return {"awaited": awaited, "awaiter": awaiter}


def listen(awaited: str, address: str) -> dict[str, Any]:
    return {"awaited": awaited, "address": address}


def task_create(
    id: str,
    timeout_at: int,
    tags: dict[str, str] | None = None,
    ttl: int = TTL,
    pid: str = PID,
) -> dict[str, Any]:
    data = create(id, timeout_at, TARGETED if tags is None else tags)
    action = {"kind": "promise.create", "head": {}, "data": data}
    return {"pid": pid, "ttl": ttl, "action": action}


def acquire(id: str, version: int, ttl: int = TTL, pid: str = PID) -> dict[str, Any]:
    return {"id": id, "version": version, "pid": pid, "ttl": ttl}


def ref(id: str, version: int) -> dict[str, Any]:
    return {"id": id, "version": version}


def heartbeat(*refs: dict[str, Any], pid: str = PID) -> dict[str, Any]:
    return {"pid": pid, "tasks": list(refs)}


def suspend(id: str, version: int, *awaited: str) -> dict[str, Any]:
    actions = [
        {"kind": "promise.register_callback", "head": {}, "data": callback(a, id)} for a in awaited
    ]
    return {"id": id, "version": version, "actions": actions}


def fulfill(
    id: str, version: int, state: str = "resolved", value: dict[str, Any] | None = None
) -> dict[str, Any]:
    action = {"kind": "promise.settle", "head": {}, "data": settle(id, state, value)}
    return {"id": id, "version": version, "action": action}


def fence(id: str, version: int, kind: str, data: dict[str, Any]) -> dict[str, Any]:
    return {"id": id, "version": version, "action": {"kind": kind, "head": {}, "data": data}}


def task_id(id: str, version: int | None = None) -> dict[str, Any]:
    return {"id": id} if version is None else {"id": id, "version": version}


def schedule_create(
    id: str,
    cron: str,
    promise_id: str,
    promise_timeout: int,
    tags: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "id": id,
        "cron": cron,
        "promiseId": promise_id,
        "promiseTimeout": promise_timeout,
        "promiseTags": TARGETED if tags is None else tags,
    }


# -- setup steps ----------------------------------------------------------------------------


def spawn(m: Machine, id: str, timeout_at: int, now: int = 0, **tags: str) -> dict:
    """A targeted promise with its pending task (version 0) and an execute to ``W``."""
    return ok(m, "promise.create", create(id, timeout_at, {**TARGETED, **_tags(tags)}), now)


def claim(m: Machine, id: str, timeout_at: int, now: int = 0, **tags: str) -> dict:
    """A targeted promise with its task acquired by ``PID`` (version 1, lease ``now + TTL``)."""
    data = task_create(id, timeout_at, {**TARGETED, **_tags(tags)})
    return ok(m, "task.create", data, now)


def plain(m: Machine, id: str, timeout_at: int, now: int = 0, **tags: str) -> dict:
    """A promise with no target (no task, no timeout unless it is a timer)."""
    return ok(m, "promise.create", create(id, timeout_at, _tags(tags)), now)


def park(m: Machine, id: str, version: int, now: int, *awaited: str) -> None:
    """Suspend an acquired task on ``awaited``."""
    assert ok(m, "task.suspend", suspend(id, version, *awaited), now) == {}


def _tags(tags: dict[str, str]) -> dict[str, str]:
    """``branch="r"`` → ``{"resonate:branch": "r"}``: keyword tags in the resonate namespace."""
    return {f"resonate:{k}": v for k, v in tags.items()}


# -- expected wire values -------------------------------------------------------------------


def promise(
    id: str,
    state: str,
    timeout_at: int,
    created_at: int,
    *,
    tags: dict[str, str] | None = None,
    settled_at: int | None = None,
    param: dict[str, Any] | None = None,
    value: dict[str, Any] | None = None,
) -> dict[str, Any]:
    record: dict[str, Any] = {
        "id": id,
        "state": state,
        "param": param or {},
        "value": value or {},
        "tags": tags or {},
        "timeoutAt": timeout_at,
        "createdAt": created_at,
    }
    if settled_at is not None:
        record["settledAt"] = settled_at
    return record


def task(
    id: str,
    state: str,
    version: int,
    resumes: int = 0,
    ttl: int | None = None,
    pid: str | None = None,
) -> dict[str, Any]:
    record: dict[str, Any] = {"id": id, "state": state, "version": version, "resumes": resumes}
    if ttl is not None:
        record["ttl"] = ttl
    if pid is not None:
        record["pid"] = pid
    return record


def leased(id: str, version: int, resumes: int = 0) -> dict[str, Any]:
    """An acquired task held by ``PID`` with ``TTL``."""
    return task(id, "acquired", version, resumes, TTL, PID)


def execute(id: str, version: int, address: str = W) -> dict[str, Any]:
    message = {"kind": "execute", "head": {}, "data": {"task": {"id": id, "version": version}}}
    return {"address": address, "message": message}


def unblock(address: str, record: dict[str, Any]) -> dict[str, Any]:
    message = {"kind": "unblock", "head": {}, "data": {"promise": record}}
    return {"address": address, "message": message}


def timeout(id: str, at: int) -> dict[str, Any]:
    return {"id": id, "timeout": at}


def retry(id: str, at: int) -> dict[str, Any]:
    return {"id": id, "type": 0, "timeout": at}


def lease(id: str, at: int) -> dict[str, Any]:
    return {"id": id, "type": 1, "timeout": at}


def awaits(awaiter: str, awaited: str) -> dict[str, Any]:
    return {"awaiter": awaiter, "awaited": awaited}


def listener(id: str, address: str) -> dict[str, Any]:
    return {"id": id, "address": address}


def schedule(
    id: str,
    cron: str,
    promise_id: str,
    promise_timeout: int,
    created_at: int,
    next_run_at: int,
    last_run_at: int | None = None,
    tags: dict[str, str] | None = None,
) -> dict[str, Any]:
    record: dict[str, Any] = {
        "id": id,
        "cron": cron,
        "promiseId": promise_id,
        "promiseTimeout": promise_timeout,
        "promiseParam": {},
        "promiseTags": TARGETED if tags is None else tags,
        "createdAt": created_at,
        "nextRunAt": next_run_at,
    }
    if last_run_at is not None:
        record["lastRunAt"] = last_run_at
    return record


_SNAPSHOT_PARTS = (
    "promises",
    "promiseTimeouts",
    "callbacks",
    "listeners",
    "tasks",
    "taskTimeouts",
    "messages",
    "schedules",
    "scheduleTimeouts",
)


def state(**parts: list[dict[str, Any]]) -> dict[str, Any]:
    """An expected ``debug.snap``: the named parts (camelCase), every other part empty.

    Lists are given in the snapshot's order: by id (then address, awaited or type);
    executes before unblocks.
    """
    unknown = set(parts) - set(_SNAPSHOT_PARTS)
    assert not unknown, unknown
    return {name: parts.get(name, []) for name in _SNAPSHOT_PARTS}
