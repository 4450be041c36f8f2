"""A backlog of tasks no worker takes, on a real ``troth serve``: made fast through the public
API, and waited on until the server has nothing overdue. Shared by ``tests/server/test_idle.py``
and ``bench/idle.py``.
"""

from __future__ import annotations

import re
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from tests.support.servers import FAR, VERSION

# Clients creating the backlog, each through a root task of its own (so that PostgreSQL
# runs them side by side), and the promises one ``task.fences`` request creates: a hundred
# creates per round trip and transaction, the fastest way in through the public API.
CREATORS = 3
BATCH = 100
LEASE = 3_600_000  # ms: the roots stay acquired through a run, so they are never retried

_LAG = re.compile(rb"^troth_timeouts_lag_seconds (\S+)$", re.MULTILINE)


def _create(url: str, root: str, n: int, target: str) -> None:
    """Promises ``root:0`` .. ``root:<n-1>``, each with a pending task for ``target``."""

    def post(http: httpx.Client, kind: str, data: dict[str, Any]) -> Any:
        body = {"kind": kind, "head": {"corrId": root, "version": VERSION}, "data": data}
        response = http.post("/", json=body)
        assert response.status_code == 200, response.text
        return response.json()["data"]

    def create(id: str, target: str) -> dict[str, Any]:
        data = {"id": id, "timeoutAt": FAR, "tags": {"resonate:target": target}}
        return {"kind": "promise.create", "head": {"corrId": id, "version": VERSION}, "data": data}

    with httpx.Client(base_url=url, timeout=120) as http:
        claim = {"pid": "backlog", "ttl": LEASE, "action": create(root, "poll://any@backlog")}
        version = post(http, "task.create", claim)["task"]["version"]
        for first in range(0, n, BATCH):
            ids = range(first, min(n, first + BATCH))
            actions = [create(f"{root}:{i}", target) for i in ids]
            fences = post(http, "task.fences", {"id": root, "version": version, "actions": actions})
            assert all(fence["head"]["status"] == 200 for fence in fences["fences"]), fences


def create_backlog(url: str, n: int, target: str) -> float:
    """``n`` promises whose pending tasks target ``target`` (plus ``CREATORS`` acquired
    roots); promises a second."""
    shares = [n // CREATORS + (i < n % CREATORS) for i in range(CREATORS)]
    roots = [f"backlog-{i}" for i in range(CREATORS)]
    started = time.monotonic()
    with ThreadPoolExecutor(CREATORS) as pool:
        list(pool.map(_create, [url] * CREATORS, roots, shares, [target] * CREATORS))
    return n / (time.monotonic() - started)


def lag(url: str) -> float:
    """The server's ``troth_timeouts_lag_seconds``: how overdue the earliest deadline its
    timeouts loop has to fire is (0: none)."""
    match = _LAG.search(httpx.get(f"{url}/metrics", timeout=30).content)
    assert match is not None
    return float(match.group(1))


def wait_caught_up(url: str, retry_timeout_s: float, timeout: float = 600) -> float | None:
    """Wait until every task's first retry has come due (``retry_timeout_s`` from now, the
    backlog being written) and the timeouts loop has nothing overdue left; the seconds
    waited, or None if it still had after ``timeout`` s (a server the retries saturate).

    From then on only the steady state is left: the first firing of each retry is a
    transition per task, once (the server defers it), not per retry period.
    """
    started = time.monotonic()
    time.sleep(retry_timeout_s + 1)
    while lag(url) > 0:
        if time.monotonic() - started > timeout:
            return None
        time.sleep(0.5)
    return time.monotonic() - started
