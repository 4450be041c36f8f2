"""A schedule's catch-up of millions of missed occurrences, on a live server: the server
keeps answering and stops on SIGTERM while it works through them (issue 10).

The schedule is created in debug time 10 million seconds ago with a per-second cron, so the
wall-clock timeouts loop, resumed by ``debug.stop``, owes it 10 million occurrences. The
catch-up runs in chunks, each its own short transaction, so ``/health`` keeps answering
and shutdown keeps its timeout, however far the catch-up has got. How fast ``/health``
answers meanwhile, against the same server's before the catch-up, is a figure of
``bench/delivery.py`` (a loaded machine moves it, so it is not asserted here).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import httpx
import pytest

from tests.support.postgres import cluster_url, fresh_database
from tests.support.servers import BACKENDS, TrothServer, now_ms
from tests.support.waiting import eventually

# Slow: a troth serve process per test (tests/conformance covers the server in the fast suite).
pytestmark = pytest.mark.slow

MISSED = 10_000_000  # occurrences the catch-up owes: one a second for ~116 days
SHUTDOWN_TIMEOUT = 3000  # ms
# Without chunks, /health does not answer at all once the catch-up has started; with them
# each answer waits at most for one chunk's transaction. 5 s tells the two apart on a
# machine loaded enough to stall any process for a while.
NEVER_OVER = 5.0  # s
SAMPLING = 5.0  # s of /health samples during the catch-up
EVERY_SECOND = {
    "id": "every-second",
    "cron": "* * * * * *",
    "promiseId": "{{.id}}.{{.timestamp}}",
    "promiseTimeout": 1000,
    "promiseTags": {"resonate:target": "poll://any@nobody"},
}


@pytest.fixture(params=BACKENDS)
def db_flags(request: pytest.FixtureRequest) -> Iterator[tuple[str, ...]]:
    if request.param == "sqlite":
        yield ()
        return
    with fresh_database(cluster_url(), "troth_catch_up") as url:
        yield ("--db", url)


def last_run_at(server: TrothServer) -> int:
    return server.ok("schedule.get", {"id": "every-second"})["schedule"].get("lastRunAt", 0)


def test_a_catch_up_of_ten_million_occurrences_blocks_neither_health_nor_shutdown(
    start_server: Callable[..., TrothServer], db_flags: tuple[str, ...]
) -> None:
    server = start_server("--shutdown-timeout", str(SHUTDOWN_TIMEOUT), *db_flags)
    server.ok("debug.start")
    created_at = now_ms() - MISSED * 1000
    server.ok("schedule.create", EVERY_SECOND, **{"resonate:debug_time": created_at})
    server.ok("debug.stop")  # the wall-clock loop resumes and owes MISSED occurrences

    with httpx.Client(base_url=server.url, timeout=5) as client:
        deadline = time.monotonic() + 10
        while last_run_at(server) == 0:
            assert time.monotonic() < deadline, "the catch-up did not start"
            time.sleep(0.05)
        started = last_run_at(server)

        answered = 0
        end = time.monotonic() + SAMPLING
        while time.monotonic() < end:
            assert client.get("/health", timeout=NEVER_OVER).status_code == 200
            answered += 1
            time.sleep(0.02)
        reached = last_run_at(server)

    caught_up = (reached - started) // 1000
    figures = f"{answered} /health answered; {caught_up} occurrences created meanwhile"
    print(figures)
    assert caught_up > 0, figures  # the catch-up was running all along...
    assert reached < now_ms() - 1_000_000, figures  # ...and far from done

    assert server.process is not None
    sent = time.monotonic()
    server.process.terminate()
    assert server.process.wait(SHUTDOWN_TIMEOUT / 1000 + 5) == 0
    stopped = time.monotonic() - sent
    print(f"SIGTERM to exit: {stopped:.2f} s")
    # The catch-up stops between chunks, well before the shutdown timeout would cut it off
    # (measured 0.3 s of the 3 s).
    assert stopped < SHUTDOWN_TIMEOUT / 1000


def test_a_catch_up_window_skips_the_older_missed_occurrences(
    start_server: Callable[..., TrothServer],
) -> None:
    server = start_server("--schedule-catchup-window", "10000")
    server.ok("debug.start")
    server.ok("schedule.create", EVERY_SECOND, **{"resonate:debug_time": now_ms() - 3_600_000})
    resumed = now_ms()
    server.ok("debug.stop")
    eventually(lambda: last_run_at(server) >= resumed, timeout=5)
    instants = sorted(int(p["id"].rsplit(".", 1)[1]) for p in server.snap()["promises"])
    # The hour's backlog is skipped but for its last 10 s, which are created in order.
    assert instants[0] >= resumed - 10_000
    assert instants == list(range(instants[0], instants[-1] + 1, 1000))
    assert len(instants) < 20
