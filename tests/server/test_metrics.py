"""``GET /metrics``: a known workload moves each counter and histogram by exactly its size,
and the levels read at scrape time (outbox, timeouts lag, halted tasks, poll connections)
say what the database and the hub hold."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.push import PushTarget
from tests.support.servers import BACKENDS, FAR, TrothServer, now_ms, serve
from tests.support.sse import SseClient
from tests.support.waiting import eventually

# Slow: a troth serve process per test (tests/conformance covers the server in the fast suite).
pytestmark = pytest.mark.slow

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(server: TrothServer, token: str | None = None) -> Samples:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    response = httpx.get(f"{server.url}/metrics", headers=headers, timeout=5)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def moved(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


@pytest.fixture(params=BACKENDS)
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TrothServer]:
    with serve(request.param, tmp_path, "--delivery-interval", "100") as server:
        yield server


def test_requests_are_counted_by_kind_and_status_and_timed(server: TrothServer) -> None:
    before = scrape(server)
    for i in range(3):
        server.create_promise(f"p{i}")
    assert server.call("promise.get", {"id": "missing"})[0] == 404
    assert server.call("promise.get", {"id": "p0"})[0] == 200
    assert server.call("no.such.kind", {})[0] == 400
    after = scrape(server)

    assert moved(before, after, "resonate_request_total", kind="promise.create", status="200") == 3
    assert moved(before, after, "resonate_request_total", kind="promise.get", status="404") == 1
    assert moved(before, after, "resonate_request_total", kind="promise.get", status="200") == 1
    # A kind the client made up is counted, but never becomes a label of its own.
    assert moved(before, after, "resonate_request_total", kind="invalid", status="400") == 1
    count = "resonate_request_duration_seconds_count"
    assert moved(before, after, count, kind="promise.create") == 3
    assert moved(before, after, count, kind="promise.get") == 2
    assert moved(before, after, "resonate_request_duration_seconds_sum", kind="promise.create") > 0
    # Each create committed on its own (one client, one at a time): three commits of one.
    backend = "postgres" if str(server.db).startswith("postgresql") else "sqlite"
    assert moved(before, after, "troth_storage_commit_requests_count", backend=backend) == 3
    assert moved(before, after, "troth_storage_commit_requests_sum", backend=backend) == 3
    assert moved(before, after, "troth_storage_commit_seconds_count", backend=backend) == 3
    if backend == "postgres":
        assert value(after, "troth_pg_pool_connections") >= 1
        assert ("troth_pg_pool_waits_total", frozenset()) in after
    else:
        assert ("troth_pg_pool_waits_total", frozenset()) not in after


def test_poll_deliveries_and_connections_per_group(server: TrothServer) -> None:
    before = scrape(server)
    stream = SseClient(server.port, "g", "w1")
    try:
        eventually(lambda: value(scrape(server), "troth_poll_connections", group="g") == 1)
        server.create_promise("p1", tags={"resonate:target": "poll://any@g"})
        assert stream.message()["kind"] == "execute"
        eventually(lambda: value(scrape(server), "troth_outbox_messages") == 0)
        after = scrape(server)
    finally:
        stream.close()
    assert moved(before, after, "resonate_messages_total", kind="execute") == 1
    assert moved(before, after, "troth_messages_total", transport="poll", event="enqueued") == 1
    assert moved(before, after, "troth_messages_total", transport="poll", event="delivered") == 1
    assert moved(before, after, "troth_messages_total", transport="poll", event="failed") == 0
    # Poll deliveries are not HTTP pushes: the reference's deliveries counter stays put.
    assert moved(before, after, "resonate_deliveries_total", status="success") == 0
    eventually(lambda: value(scrape(server), "troth_poll_connections", group="g") == 0)


def test_pushes_count_attempts_failures_and_rounds(tmp_path: Path, push_target: PushTarget) -> None:
    target = push_target
    flags = ("--push-retries", "2", "--push-backoff", "50", "--push-backoff-max", "60000")
    with serve("sqlite", tmp_path, *flags) as server:
        before = scrape(server)
        server.create_promise("ok", tags={"resonate:target": target.url})
        eventually(lambda: target.received)
        eventually(lambda: value(scrape(server), "troth_outbox_messages") == 0)
        delivered = scrape(server)
        assert moved(before, delivered, "troth_push_attempts_total") == 1
        assert moved(before, delivered, "troth_push_failures_total") == 0
        assert moved(before, delivered, "resonate_deliveries_total", status="success") == 1
        assert moved(before, delivered, "troth_messages_total", transport="push",
                     event="delivered") == 1  # fmt: skip

        target.fail_with = 503
        server.create_promise("failing", tags={"resonate:target": target.url})
        # One round of two attempts; the next round waits the long backoff.
        eventually(lambda: value(scrape(server), "resonate_deliveries_total", status="error") == 1)
        failed = scrape(server)
        assert len(target.attempts) == 3
        assert moved(delivered, failed, "troth_push_attempts_total") == 2
        assert moved(delivered, failed, "troth_push_failures_total") == 2
        assert moved(delivered, failed, "troth_messages_total", transport="push",
                     event="failed") == 1  # fmt: skip
        assert value(failed, "troth_outbox_messages") == 1
        time.sleep(1.2)
        later = scrape(server)
        # The stuck message ages with the clock.
        age = value(later, "troth_outbox_oldest_age_seconds")
        assert age - value(failed, "troth_outbox_oldest_age_seconds") >= 1.0


def test_schedule_promises_timeouts_lag_and_halted_tasks(server: TrothServer) -> None:
    server.ok("debug.start")  # the wall-clock loop stops: deadlines fall behind
    created_at = now_ms() - 60_000
    schedule = {
        "id": "s",
        "cron": "* * * * * *",
        "promiseId": "{{.id}}.{{.timestamp}}",
        "promiseTimeout": 3_600_000,
        "promiseTags": {"resonate:target": "poll://any@nobody"},
    }
    server.ok("schedule.create", schedule, **{"resonate:debug_time": created_at})
    before = scrape(server)
    server.ok("debug.tick", {"time": created_at + 5_000})
    after = scrape(server)
    occurrences = [p for p in server.snap()["promises"] if p["id"].startswith("s.")]
    assert len(occurrences) >= 5
    assert moved(before, after, "resonate_schedule_promises_total") == len(occurrences)

    # The schedule's next occurrence is due ~55 s ago and nothing fires it.
    next_run_at = server.ok("schedule.get", {"id": "s"})["schedule"]["nextRunAt"]
    lag = value(scrape(server), "troth_timeouts_lag_seconds")
    assert abs(lag - (now_ms() - next_run_at) / 1000) < 2
    server.ok("schedule.delete", {"id": "s"})
    server.ok("debug.stop")
    eventually(lambda: value(scrape(server), "troth_timeouts_lag_seconds") == 0)

    server.create_promise("job", FAR, tags={"resonate:target": "poll://any@nobody"})
    server.ok("task.acquire", {"id": "job", "version": 0, "pid": "w", "ttl": 60_000})
    assert value(scrape(server), "troth_tasks_halted") == 0
    server.ok("task.halt", {"id": "job"})
    assert value(scrape(server), "troth_tasks_halted") == 1


def test_the_metrics_token_guards_the_scrape(tmp_path: Path) -> None:
    with serve("sqlite", tmp_path, env={"TROTH_METRICS_TOKEN": "s3cret"}) as server:
        assert httpx.get(f"{server.url}/metrics").status_code == 401
        wrong = {"authorization": "Bearer nope"}
        assert httpx.get(f"{server.url}/metrics", headers=wrong).status_code == 401
        assert ("troth_outbox_messages", frozenset()) in scrape(server, token="s3cret")


def test_metrics_off_is_a_404(tmp_path: Path) -> None:
    with serve("sqlite", tmp_path, "--no-metrics") as server:
        assert httpx.get(f"{server.url}/metrics").status_code == 404
        server.create_promise("p")  # and the server serves as ever
