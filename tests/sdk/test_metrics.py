"""``Troth(metrics=registry)``: a known workload moves the SDK's counters and histograms by
exactly its size, in embedded and remote mode; without a registry nothing is counted."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from prometheus_client import CollectorRegistry

from troth.sdk import Constant, Context, Troth
from troth.sdk.metrics import UNMEASURED

pytestmark = pytest.mark.anyio


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


async def test_runs_step_attempts_retries_and_latency_are_counted(
    make_app: Callable[..., Troth], uid: str
) -> None:
    registry = CollectorRegistry()
    app = make_app(metrics=registry)
    failures = 2

    def flaky() -> str:
        nonlocal failures
        if failures:
            failures -= 1
            raise RuntimeError("down")
        return "up"

    def double(n: int) -> int:
        return 2 * n

    @app.register
    async def job(ctx: Context) -> str:
        state = await ctx.options(retry=Constant(0.01, max_attempts=5)).run(flaky)
        return f"{state} {await ctx.run(double, 2)}"

    async with app:
        assert await app.run(f"{uid}-job", job).result() == "up 4"

    assert sample(registry, "troth_sdk_runs_started_total", function="job") == 1
    finished = "troth_sdk_runs_finished_total"
    assert sample(registry, finished, function="job", outcome="completed") == 1
    attempts = "troth_sdk_step_attempts_total"
    assert sample(registry, attempts, step="run:flaky", outcome="failed") == 2
    assert sample(registry, attempts, step="run:flaky", outcome="ok") == 1
    assert sample(registry, attempts, step="run:double", outcome="ok") == 1
    assert sample(registry, "troth_sdk_step_retries_total", step="run:flaky") == 2
    assert sample(registry, "troth_sdk_step_seconds_count", step="run:flaky") == 3
    assert sample(registry, "troth_sdk_step_seconds_sum", step="run:flaky") > 0
    # A first run answers nothing from records: no replay to time.
    assert sample(registry, "troth_sdk_replay_seconds_count", function="job") == 0


async def test_a_resumed_run_replays_and_is_timed(make_app: Callable[..., Troth], uid: str) -> None:
    registry = CollectorRegistry()
    app = make_app(metrics=registry)
    steps = 0

    def step() -> int:
        nonlocal steps
        steps += 1
        return steps

    @app.register
    async def child(ctx: Context) -> str:
        return "child"

    @app.register
    async def parent(ctx: Context) -> str:
        made = await ctx.run(step)
        return f"{made} {await ctx.rpc(child)}"

    async with app:
        assert await app.run(f"{uid}-parent", parent).result() == "1 child"

    finished = "troth_sdk_runs_finished_total"
    # The parent suspends on its child, then runs again from its first line: the step is
    # answered from its record (not run again) and the rpc's promise is found settled.
    assert steps == 1
    assert sample(registry, "troth_sdk_runs_started_total", function="parent") == 2
    assert sample(registry, finished, function="parent", outcome="suspended") == 1
    assert sample(registry, finished, function="parent", outcome="completed") == 1
    assert sample(registry, "troth_sdk_replay_seconds_count", function="parent") == 1
    assert sample(registry, "troth_sdk_runs_started_total", function="child") == 1
    assert sample(registry, finished, function="child", outcome="completed") == 1
    assert sample(registry, "troth_sdk_step_attempts_total", step="run:step", outcome="ok") == 1


def test_without_a_registry_nothing_is_measured() -> None:
    assert Troth(db=":memory:").metrics is UNMEASURED


def test_two_apps_cannot_share_a_registry() -> None:
    registry = CollectorRegistry()
    Troth(db=":memory:", metrics=registry)
    with pytest.raises(ValueError, match="Duplicated"):
        Troth(db=":memory:", metrics=registry)
