"""Clients racing on a few promises and tasks leave a history some sequential run explains.

Each backend (``conftest.backend``) records histories of 8 clients x 5 phases x 2
operations on two origins of three ids each (plus a tick between phases), and one of 16
clients on a single origin, and the checker must find an order of them, consistent with real
time, in which a fresh oracle gives every recorded response. Broken backends show
the check has teeth: one that answers stale reads is caught, and lost answers (500s) are
tolerated the way they must be.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from tests.linearizability.checker import Operation, check
from tests.linearizability.history import RETRY_TIMEOUT, record
from tests.linearizability.targets import Opener, StaleReads, Target, Unanswered

SEEDS = range(3)


async def _recorded(
    open: Opener, seed: int, wrap: Callable[[Target], Target] | None = None, **size: Any
) -> tuple[list[Operation], Target]:
    target = await open()
    if wrap is not None:
        target = wrap(target)
    try:
        return await record(target, seed, **size), target
    finally:
        await target.close()


def overlaps(history: list[Operation]) -> int:
    """Pairs of operations whose intervals overlap: the races the history holds."""
    spans = sorted((op.call, op.ret or op.call) for op in history)
    return sum(1 for i, (_, end) in enumerate(spans) for start, _ in spans[i + 1 :] if start < end)


@pytest.mark.parametrize("seed", SEEDS)
def test_racing_clients_leave_a_linearizable_history(backend: Opener, seed: int) -> None:
    history, _ = asyncio.run(_recorded(backend, seed))
    assert len(history) == 8 * 5 * 2 + 4
    assert overlaps(history) > 50, "the clients did not race"
    assert all(op.response and op.response["head"]["status"] < 500 for op in history)
    verdict = check(history, RETRY_TIMEOUT)
    assert verdict.ok, verdict.explain()


def test_sixteen_clients_racing_on_three_objects_leave_a_linearizable_history(
    backend: Opener,
) -> None:
    size = {"clients": 16, "phases": 6, "per_phase": 3, "families": ("a",)}
    history, _ = asyncio.run(_recorded(backend, 7, **size))
    assert overlaps(history) > 500, "the clients did not race"
    verdict = check(history, RETRY_TIMEOUT)
    assert verdict.ok, verdict.explain()


def test_the_workload_reaches_successes_and_conflicts(sqlite_backend: Opener) -> None:
    statuses: Counter[tuple[str, int]] = Counter()
    for seed in range(6):
        history, _ = asyncio.run(_recorded(sqlite_backend, seed))
        statuses.update((op.kind, op.response["head"]["status"]) for op in history if op.response)
    for kind in ("promise.create", "promise.settle", "task.create", "task.acquire",
                 "task.fulfill", "task.release", "task.suspend", "task.fence"):  # fmt: skip
        assert statuses[kind, 200] > 0, (kind, statuses)
    assert statuses["task.acquire", 409] > 0, statuses


def test_a_backend_answering_stale_reads_is_caught(sqlite_backend: Opener) -> None:
    for seed in range(20):
        history, stale = asyncio.run(_recorded(sqlite_backend, seed, StaleReads))
        assert isinstance(stale, StaleReads)
        if stale.lies:
            break
    else:
        pytest.fail("the stale backend never lied")
    verdict = check(history, RETRY_TIMEOUT)
    assert not verdict.ok, f"seed {seed}: {stale.lies} stale reads went unnoticed"


@pytest.mark.parametrize("seed", SEEDS)
def test_lost_answers_are_explained_as_happened_or_not(sqlite_backend: Opener, seed: int) -> None:
    history, _ = asyncio.run(_recorded(sqlite_backend, seed, Unanswered))
    assert sum(not op.known for op in history) >= 10
    verdict = check(history, RETRY_TIMEOUT)
    assert verdict.ok, verdict.explain()
