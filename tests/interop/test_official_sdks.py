"""Each official Resonate SDK (TypeScript, Python) runs real workflows on `troth serve`.

Every test runs once per SDK. Workers and clients are separate OS processes (see
tests/interop/sdks.py); the workflows themselves are in interop/ts/sdk.mjs and interop/py/sdk.py.
"""

from __future__ import annotations

import time
from collections import Counter

from tests.interop.sdks import LEASE_TTL_MS, Sdk, settle_json


def test_hello_world_returns_the_greeting(sdk: Sdk) -> None:
    group = sdk.unique("g")
    sdk.worker(group)
    assert sdk.invoke(sdk.unique("hello"), "hello", group, "world").result() == "hello world"


def test_ten_sequential_steps_each_run_exactly_once(sdk: Sdk) -> None:
    group = sdk.unique("g")
    sdk.worker(group)
    tag = sdk.unique("steps")
    result = sdk.invoke(tag, "steps", group, tag, 10).result()
    assert result == [i * i for i in range(1, 11)]
    assert [line for line in sdk.marker_lines() if line.startswith(tag)] == [
        f"{tag} step {i}" for i in range(1, 11)
    ]


def test_fan_out_of_twenty_remote_children_gathers_every_result(sdk: Sdk) -> None:
    group = sdk.unique("g")
    sdk.worker(group)
    result = sdk.invoke(sdk.unique("fanout"), "fanout", group, group, 20).result(timeout=60)
    assert result == [i * i for i in range(1, 21)]


def test_rpc_crosses_to_a_worker_in_another_group(sdk: Sdk) -> None:
    group_a, group_b = sdk.unique("ga"), sdk.unique("gb")
    a, b = sdk.worker(group_a), sdk.worker(group_b)
    result = sdk.invoke(sdk.unique("rpc"), "caller", group_a, group_b, 41).result()
    assert result == {"pid": a.pid, "callee": {"pid": b.pid, "value": 42}}


def test_durable_sleep_of_two_seconds_wakes_the_workflow(sdk: Sdk) -> None:
    group = sdk.unique("g")
    sdk.worker(group)
    started = time.monotonic()
    slept_ms = sdk.invoke(sdk.unique("sleep"), "sleeper", group, 2000).result()
    elapsed = time.monotonic() - started
    # The workflow measures its own sleep between two durable steps; the server's
    # sweep runs once a second, so a wake may come up to about a second late.
    assert 2000 <= slept_ms < 6000
    assert elapsed >= 2.0


def test_external_promise_resolved_over_http_resumes_the_workflow(sdk: Sdk) -> None:
    group = sdk.unique("g")
    sdk.worker(group)
    tag = sdk.unique("ext")
    run = sdk.invoke(tag, "waiter", group, tag)
    promise_id = sdk.wait_marker(f"{tag} promise ").split()[-1]
    assert promise_id.startswith(f"{tag}:"), promise_id

    settled = settle_json(sdk.server, promise_id, {"approved": True})
    assert settled["promise"]["state"] == "resolved", settled

    assert run.result() == {"got": {"approved": True}}


def test_a_fresh_worker_finishes_after_kill_9_without_rerunning_finished_steps(
    sdk: Sdk,
) -> None:
    group = sdk.unique("g")
    doomed = sdk.worker(group, hang_step=3)
    tag = sdk.unique("recover")
    run = sdk.invoke(tag, "recover", group, tag, 5)

    sdk.wait_marker(f"{tag} enter 3 {doomed.pid}")
    doomed.kill9()
    rescuer = sdk.worker(group)

    # The rescuer gets the task once the dead worker's lease lapses.
    assert run.result(timeout=30 + 5 * LEASE_TTL_MS / 1000) == [1, 2, 3, 4, 5]

    lines = [line for line in sdk.marker_lines() if line.startswith(tag)]
    done = Counter(line for line in lines if " done " in line)
    assert done == {f"{tag} done {i}": 1 for i in range(1, 6)}, lines
    entered = [line.removeprefix(f"{tag} enter ") for line in lines if " enter " in line]
    # Steps 1 and 2 finished before the kill and are never entered again; step 3 was
    # in flight and is re-run by the rescuer, which also runs 4 and 5.
    assert entered == [
        f"1 {doomed.pid}",
        f"2 {doomed.pid}",
        f"3 {doomed.pid}",
        f"3 {rescuer.pid}",
        f"4 {rescuer.pid}",
        f"5 {rescuer.pid}",
    ], lines
