"""Seeded chaos against the SDK: every seed ends as the uninterrupted run does.

Each seed runs the workflows of ``workflows.py`` on three workers against the oracle,
with that seed's faults (lost, duplicated and delayed requests, replies and messages;
crashing workers). The server's invariants are checked after every step of the run; at
the end no step may have started after its result was recorded, and every promise of the
workflows must hold what the uninterrupted run's holds. A failure prints the seed, what
went wrong and the end of the trace; ``SIM_SEED=<n>`` runs that one seed and prints its
whole trace (with ``-s``), ``SIM_SEEDS=<n>`` runs n seeds instead of the default 200.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import msgspec
import pytest

from troth.protocol.records import PromiseRecord, PromiseState
from troth.protocol.requests import PromiseCreateRequest
from troth.sdk.execution import Execution
from troth.sdk.replay import STEP_TAG

from .checks import problems, report
from .faults import Faults
from .simulator import Result, Simulation
from .workflows import EXPECTED, ROOTS

ONE = os.environ.get("SIM_SEED")
SEEDS = [int(ONE)] if ONE else range(int(os.environ.get("SIM_SEEDS", "200")))


@pytest.fixture(scope="module")
def uninterrupted() -> Result:
    result = Simulation(0, Faults.none()).run()
    assert not problems(result, None), report(result, problems(result, None))
    return result


@pytest.fixture(scope="module")
def tally() -> Counter[str]:
    return Counter()


def test_the_uninterrupted_run_gives_the_expected_results(uninterrupted: Result) -> None:
    assert {root.id: uninterrupted.outcome[root.id] for root in ROOTS} == {
        id: ("resolved", value) for id, value in EXPECTED.items()
    }
    starts = Counter(e.key for e in uninterrupted.ledger if e.event == "start")
    retried = {key: n for key, n in starts.items() if n > 1}
    # Without faults every step runs once, except the flaky one (fails twice, then
    # succeeds) and the doomed one (three attempts, all failing).
    assert sorted(retried.values()) == [3, 3], retried
    leaves = {"run:double", "run:flaky", "run:doomed"}
    steps = {id for id, tag in uninterrupted.step_promises.items() if tag in leaves}
    assert set(starts) == steps and len(steps) == 17


@pytest.mark.parametrize("seed", SEEDS)
def test_a_seed_ends_as_the_uninterrupted_run(
    seed: int, uninterrupted: Result, tally: Counter[str]
) -> None:
    result = Simulation(seed).run()
    if ONE:
        print("\n".join(result.trace))
    found = problems(result, uninterrupted)
    assert not found, report(result, found)
    tally.update(result.stats)
    tally["seeds"] += 1
    starts = Counter(e.key for e in result.ledger if e.event == "start")
    tally["steps started again"] += sum(n - 1 for n in starts.values())


def test_the_seeds_met_every_kind_of_trouble(tally: Counter[str]) -> None:
    """The chaos must have reached the recovery paths, or the seeds above proved little."""
    if tally["seeds"] < 200:
        pytest.skip("needs the full run of 200 seeds")
    for trouble in (
        "crash",
        "request lost",
        "reply lost",
        "message lost",
        "message duplicated",
        "fired lease",  # a lease lapsed: a crashed or cut-off worker's task moved on
        "fired retry",  # a pending task was offered again
        "task.acquire 409",  # a duplicated or stale execute
        "task.fence 409",  # a run that lost its task could not write
        "task.suspend 300",  # a suspend raced a settlement
        "task.create 409",  # a start was retried while the first one was being driven
        "steps started again",  # a step was cut short and ran again before it was recorded
    ):
        assert tally[trouble] > 0, f"no {trouble!r} in {sorted(tally.items())}"


def test_a_seed_runs_the_same_every_time() -> None:
    first, second = Simulation(17).run(), Simulation(17).run()
    assert first.stats["crash"] > 0 and len(first.trace) > 200  # a seed with something in it
    assert first.trace == second.trace
    assert first.ledger == second.ledger


def test_the_ledger_catches_an_sdk_that_runs_a_recorded_step_again(
    monkeypatch: pytest.MonkeyPatch, uninterrupted: Result
) -> None:
    """The exactly-once check can fail: an SDK that forgets recorded step results (it reads
    every finished step back as pending) runs them again on replay, and is caught."""
    create = Execution.create

    async def forgetful(self: Execution, request: PromiseCreateRequest) -> PromiseRecord:
        record = await create(self, request)
        if request.tags.get(STEP_TAG, "").startswith("run:"):
            return msgspec.structs.replace(record, state=PromiseState.PENDING)
        return record

    monkeypatch.setattr(Execution, "recorded", lambda self, id: None)
    monkeypatch.setattr(Execution, "create", forgetful)
    found = problems(Simulation(3, Faults.none()).run(), uninterrupted)
    assert any("after its result was recorded" in p for p in found), found


def test_a_seed_runs_the_same_in_another_process() -> None:
    """``SIM_SEED`` reproduces a failure in a new process, whose string hashing (and so any
    set's order) differs: nothing in the run may depend on it."""
    here = hashlib.sha256("\n".join(Simulation(33).run().trace).encode()).hexdigest()
    script = (
        "import hashlib, sys; sys.path.insert(0, sys.argv[1]);"
        "from simulation.simulator import Simulation;"
        "trace = Simulation(33).run().trace;"
        "print(hashlib.sha256(chr(10).join(trace).encode()).hexdigest())"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    tests = str(Path(__file__).resolve().parents[1])
    there = subprocess.run(
        [sys.executable, "-c", script, tests], env=env, capture_output=True, text=True, check=True
    )
    assert there.stdout.strip() == here
