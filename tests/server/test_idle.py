"""An idle server is idle at any backlog, against a real ``troth serve``: tasks that no worker
can take cost it nothing per retry period, and once a worker takes their executes the
retries run on the machine's schedule again.

The CPU share is read from ``/proc/<pid>/stat`` after the backlog is written and every
task's first retry is behind it (``tests.support.backlog.wait_caught_up``); the bound
(5 % of a core) is far from both the figure now (about 1 %) and the one before retries
were deferred (60-100 % for 20,000 tasks), so it holds on a loaded machine. The figures
for other sizes are ``bench/idle.py``'s.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.support.backlog import create_backlog, wait_caught_up
from tests.support.load import cpu_seconds
from tests.support.servers import BACKENDS, TrothServer, now_ms, serve
from tests.support.sse import SseClient
from tests.support.waiting import eventually

# Slow: a troth serve process per test, holding a backlog for tens of seconds.
pytestmark = pytest.mark.slow

NOBODY = "poll://any@nobody"  # a group no worker connects to


def idle_share(server: TrothServer, tasks: int, retry_timeout_s: float) -> float:
    """The server's CPU share of one core over 10 s, holding ``tasks`` undeliverable tasks."""
    assert server.process is not None
    pid = server.process.pid
    create_backlog(server.url, tasks, NOBODY)
    assert wait_caught_up(server.url, retry_timeout_s) is not None, "retries still overdue"
    before, at = cpu_seconds(pid), time.monotonic()
    time.sleep(10)
    share = (cpu_seconds(pid) - before) / (time.monotonic() - at)
    print(f"idle with {tasks:,} undeliverable tasks: {share:.2%} CPU over 10 s")
    return share


@pytest.mark.parametrize("backend", BACKENDS)
def test_20000_tasks_no_worker_can_take_cost_an_idle_server_under_5_percent_of_a_core(
    backend: str, tmp_path: Path
) -> None:
    # At the default retry timeout (5 s): the machine's retries come due 4,000 times a
    # second, and each would only rewrite an execute that is still waiting.
    with serve(backend, tmp_path, debug=False) as server:
        assert idle_share(server, 20_000, 5.0) < 0.05


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_idle_server_with_undeliverable_tasks_and_no_retries_due_sleeps(
    backend: str, tmp_path: Path
) -> None:
    # An hour's retry timeout: no retry comes due, so this is what delivery costs alone.
    with serve(backend, tmp_path, "--tasks-retry-timeout", "3600000", debug=False) as server:
        assert idle_share(server, 20_000, 0) < 0.02


R = 1000  # ms: the retry timeout of the schedule test


def retry_of(server: TrothServer, id: str) -> int:
    (entry,) = [t for t in server.snap()["taskTimeouts"] if t["id"] == id]
    assert entry["type"] == 0  # a pending task's retry
    return int(entry["timeout"])


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_retry_waits_for_its_execute_to_be_delivered_and_then_runs_on_the_machines_schedule(
    backend: str, tmp_path: Path
) -> None:
    with serve(backend, tmp_path, "--tasks-retry-timeout", str(R)) as server:
        created = now_ms()
        server.create_promise("p", tags={"resonate:target": "poll://any@g"})
        first = retry_of(server, "p")
        assert created + R <= first <= now_ms() + R

        # Three retry periods with no worker: the retry is due, but it would only rewrite
        # the execute that still waits, so it is left as the machine has it before firing.
        time.sleep(3.5 * R / 1000)
        snap = server.snap()
        assert [(t["id"], t["timeout"]) for t in snap["taskTimeouts"]] == [("p", first)]
        assert [m["message"]["data"]["task"] for m in snap["messages"]] == [
            {"id": "p", "version": 0}
        ]

        # A worker connects and takes the execute: the retry fires at that instant, before
        # the delivery, so its next deadline is a retry period after it.
        connected = now_ms()
        worker = SseClient(server.port, "g", "w1")
        try:
            assert worker.message()["data"]["task"] == {"id": "p", "version": 0}
            # The delivery's acknowledgement commits a moment after the write.
            eventually(lambda: server.snap()["messages"] == [])
            second = retry_of(server, "p")
            assert connected + R <= second <= now_ms() + R

            # Not acquired: at that deadline the retry sends the execute again, and arms
            # the next one a retry period on, as Lean's retry does.
            assert worker.message(timeout=R / 1000 + 5)["data"]["task"] == {
                "id": "p",
                "version": 0,
            }
            assert now_ms() >= second
            third = retry_of(server, "p")
            assert third >= second + R

            # Acquired: the lease replaces the retry.
            server.ok("task.acquire", {"id": "p", "version": 0, "pid": "w1", "ttl": 60_000})
            assert [t["type"] for t in server.snap()["taskTimeouts"]] == [1]
        finally:
            worker.close()
