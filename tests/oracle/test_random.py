"""Seeded random request sequences against the oracle, judged by the property catalogue.

After every request the oracle's ``debug.snap`` must satisfy every state property, and the
step from the previous snapshot every transition property. A ``task.fences`` batch is
judged by its definition: a copy of the oracle takes its fences one by one, the batch's
answer and state must be theirs, and the transition properties hold fence by fence. A
failure names the seed, the step, the request and the violations, so ``run(seed, steps)``
reproduces it.
"""

from __future__ import annotations

import copy
import itertools
import json
import time
from collections import Counter
from dataclasses import dataclass, field

import msgspec
import pytest

from tests.support.fences import one_by_one
from tests.support.snapshots import from_wire
from tests.support.workload import Workload
from troth.oracle import Oracle
from troth.oracle.invariants import Violation, check_state, check_step
from troth.protocol.responses import Snapshot

SEEDS = [pytest.param(seed, marks=pytest.mark.slow) for seed in range(10)]  # seconds each
STEPS = 2_000


@dataclass
class Tally:
    """What a run exercised: response statuses per kind, and timeouts fired by ticks."""

    statuses: Counter[int] = field(default_factory=Counter)
    kinds: Counter[tuple[str, int]] = field(default_factory=Counter)
    fired: Counter[str] = field(default_factory=Counter)
    events: Counter[str] = field(default_factory=Counter)
    steps: int = 0


def fired_timeouts(before: Snapshot, time: int) -> Counter[str]:
    """The timeout rows a tick at ``time`` finds due, by table."""
    due: Counter[str] = Counter()
    due["promise"] = sum(t.timeout <= time for t in before.promise_timeouts)
    due["retry"] = sum(t.timeout <= time for t in before.task_timeouts if t.type == 0)
    due["lease"] = sum(t.timeout <= time for t in before.task_timeouts if t.type == 1)
    due["schedule"] = sum(t.timeout <= time for t in before.schedule_timeouts)
    return due


def events(before: Snapshot, after: Snapshot) -> Counter[str]:
    """Transitions worth reaching: wakes of suspended tasks, suspensions, unblocks, halts."""
    was = {t.id: t.state for t in before.tasks}
    seen: Counter[str] = Counter()
    for t in after.tasks:
        if was.get(t.id) != t.state:
            seen[f"{was.get(t.id)}->{t.state}"] += 1
    seen["unblock"] = sum(m.message.kind == "unblock" for m in after.messages) - sum(
        m.message.kind == "unblock" for m in before.messages
    )
    return seen


def run(seed: int, steps: int, tally: Tally, oracle: Oracle | None = None) -> None:
    oracle = oracle or Oracle(retry_timeout=5000)
    workload = Workload(seed)
    before = from_wire(oracle.apply(workload.snap_request())["data"])
    for step in range(steps):
        request = next(workload)
        batch = request["kind"] == "task.fences"
        if batch:
            twin = copy.deepcopy(oracle)  # takes the batch's fences one by one
            sequence, passed = one_by_one(twin, request)
        response = oracle.apply(request)
        workload.observe(request, response)
        snap_request = workload.snap_request()
        snap_response = oracle.apply(snap_request)
        workload.observe(snap_request, snap_response)
        after = from_wire(snap_response["data"])

        violations = check_state(after, workload.now)
        for start, end in itertools.pairwise([before, *(passed if batch else []), after]):
            violations += check_step(start, end, workload.now)
        if batch and (response, after) != (sequence, twin.snapshot()):
            what = f"one by one: {json.dumps(sequence)}"
            violations.append(Violation("batch_is_its_fences", (request["data"]["id"],), what))
        if violations:
            listing = "\n".join(f"  {v.name} {v.ids}: {v.detail}" for v in violations)
            pytest.fail(
                f"seed {seed}, step {step}: {json.dumps(request)}\n"
                f"answered {json.dumps(response)}\n{listing}",
                pytrace=False,
            )

        status = response["head"]["status"]
        tally.statuses[status] += 1
        tally.kinds[request["kind"], status] += 1
        if request["kind"] == "debug.tick" and status == 200:
            tally.fired += fired_timeouts(before, request["data"]["time"])
        tally.events += events(before, after)
        before = after
    tally.steps += steps


@pytest.fixture(scope="module")
def tally() -> Tally:
    return Tally()


@pytest.mark.parametrize("seed", SEEDS)
def test_random_sequence_keeps_every_property(seed: int, tally: Tally) -> None:
    started = time.perf_counter()
    run(seed, STEPS, tally)
    elapsed = time.perf_counter() - started
    print(f"seed {seed}: {STEPS} steps in {elapsed:.1f}s ({STEPS / elapsed:.0f} steps/s)")


def test_a_short_random_sequence_keeps_every_property() -> None:
    """The fast suite's share of the random runs: the first steps of one seed."""
    run(0, 300, Tally())


@pytest.mark.slow  # a tally of the slow seeds above
def test_the_workload_reaches_every_status_and_timeout(tally: Tally) -> None:
    """The random runs above must have exercised the machine, or they proved nothing."""
    if tally.steps < len(SEEDS) * STEPS:
        pytest.skip("needs the full random run of this module")
    for status in (200, 300, 400, 404, 409, 422):
        assert tally.statuses[status] > 0, f"no {status} in {tally.statuses}"
    for table in ("promise", "retry", "lease", "schedule"):
        assert tally.fired[table] > 0, f"no {table} timeout fired: {tally.fired}"
    succeeded = {kind for (kind, status), n in tally.kinds.items() if status in (200, 300)}
    kinds = {kind for kind, _ in tally.kinds}
    assert kinds == succeeded, f"never succeeded: {sorted(kinds - succeeded)}"
    assert len(kinds) == 23, sorted(kinds)  # the workload's 22 protocol kinds and task.fences
    for event in ("suspended->pending", "acquired->suspended", "pending->halted", "unblock"):
        assert tally.events[event] > 0, f"never reached {event}: {tally.events}"


class ForgetfulOracle(Oracle):
    """An oracle whose snapshots lose every lease: the run must notice at once."""

    def snapshot(self) -> Snapshot:
        snap = super().snapshot()
        kept = [t for t in snap.task_timeouts if t.type != 1]
        return msgspec.structs.replace(snap, task_timeouts=kept)


def test_a_broken_machine_fails_the_run_with_seed_step_and_request() -> None:
    with pytest.raises(pytest.fail.Exception) as failure:
        run(0, STEPS, Tally(), ForgetfulOracle())
    report = str(failure.value)
    assert report.startswith("seed 0, step ")
    assert '"kind": ' in report
    assert "well_formed_task_acquired_iff_has_expires_at" in report
