"""Seeded chaos against the SDK: every seed ends as the uninterrupted run does.

Each seed runs the workflows of ``workflows.py`` on three workers against the oracle,
with that seed's faults (lost, duplicated and delayed requests, replies and messages;
crashing workers, workers stopped gracefully, server restarts; values over the payload
limits or without an encoding; code changed for the workers that boot later; executions
canceled with ``app.cancel`` while they run or sleep, one through its rpc child). The
server's invariants are checked after every step of the run; at the end no step may have
started after its result was recorded, every recorded value must have been produced by a
run of its step or computed by its function from its records (``checks.py``), and every
promise of the workflows must hold what the uninterrupted run's holds (the changed
workflow: the result of the code that recorded it, or halted). A failure prints the seed, what
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

from troth.protocol.conventions import STEP_TAG
from troth.protocol.records import PromiseRecord, PromiseState
from troth.protocol.requests import PromiseCreateRequest
from troth.sdk import codec
from troth.sdk.codec import error_to_json
from troth.sdk.execution import Execution
from troth.sdk.replay import Call

from .checks import LEAF_STEPS, problems, report
from .faults import Faults
from .simulator import Result, Simulation
from .workflows import CANCELED, CHANGED, EXPECTED, REJECTED, ROOTS

ONE = os.environ.get("SIM_SEED")
FAST_SEEDS = 5  # the fast suite's share; the others are marked slow
SEEDS = (
    [int(ONE)]
    if ONE
    else [
        seed if seed < FAST_SEEDS else pytest.param(seed, marks=pytest.mark.slow)
        for seed in range(int(os.environ.get("SIM_SEEDS", "200")))
    ]
)


@pytest.fixture(scope="module")
def uninterrupted() -> Result:
    result = Simulation(0, Faults.none()).run()
    assert not problems(result, None), report(result, problems(result, None))
    return result


@pytest.fixture(scope="module")
def tally() -> Counter[str]:
    return Counter()


def test_the_uninterrupted_run_gives_the_expected_results(uninterrupted: Result) -> None:
    outcome = uninterrupted.outcome
    assert {id: outcome[id] for id in EXPECTED} == {
        id: ("resolved", value) for id, value in EXPECTED.items()
    }
    assert {id: (outcome[id][0], outcome[id][1][0]) for id in REJECTED} == {
        id: ("rejected", error) for id, error in REJECTED.items()
    }
    for id, message in CANCELED.items():
        state, (name, text) = outcome[id]
        assert (state, name) == ("rejected_canceled", "CanceledError") and text.startswith(message)
    assert EXPECTED.keys() | REJECTED.keys() | CANCELED.keys() == {root.id for root in ROOTS}
    # Every cleanup and compensation is recorded; the saga's last compensation came first.
    undos = {
        id: value
        for id, (state, value) in outcome.items()
        if uninterrupted.step_promises[id] == "run:undo"
    }
    assert undos == {
        "csleep:2": "undone sleep 6",
        "cparent:0.1": "undone child 4",
        "cparent:1": "undone parent 4",
        "timed:2": "undone timed 4",
        "saga:3": "undone second 20",
        "saga:4": "undone first 10",
    }
    starts = Counter(e.key for e in uninterrupted.ledger if e.event == "start")
    retried = {key: n for key, n in starts.items() if n > 1}
    # Without faults every step runs once, except the flaky one (fails twice, then
    # succeeds) and the doomed one (three attempts, all failing). The unstorable values
    # (over the app's limit, refused by the server, without an encoding) are not retried.
    assert sorted(retried.values()) == [3, 3], retried
    steps = {id for id, tag in uninterrupted.step_promises.items() if tag in LEAF_STEPS}
    assert set(starts) == steps and len(steps) == 37
    unstorable = {id for id, (state, value) in outcome.items() if id in steps and
                  state == "rejected" and value[0] == "UnstorableValueError"}  # fmt: skip
    assert sorted(unstorable) == ["hoard:1", "ship:0", "unstorable:1"]
    assert "413" in outcome["ship:0"][1][1]


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
    value = result.outcome[CHANGED][1]
    if CHANGED in result.halted:
        tally["halted by changed code"] += 1
    elif isinstance(value, str) and value.startswith("refunded"):
        tally["changed code ran to the end"] += 1


@pytest.mark.slow  # a tally of the slow seeds above
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
        "task.fences 413",  # the server refused a value over its body limit
        "task.fence 413",  # ... and so did a server without task.fences
        "task.fences unknown",  # a server without troth's extension: standard fences
        "server restart",
        "request cut by a restart",  # ... refused or reset while the server was down
        "reply cut by a restart",  # ... applied, but the answer died with the connection
        "stopped",  # a graceful stop ran to its end
        "task.release while stopping",  # ... and handed a held task back
        "halted by changed code",  # a redeployed worker met a history its code did not make
        "changed code ran to the end",  # ... or an execution that had not got that far
        "canceled",  # app.cancel reached executions (a sleeper, a parent of an rpc child)
    ):
        assert tally[trouble] > 0, f"no {trouble!r} in {sorted(tally.items())}"


@pytest.mark.slow  # whole simulated runs: seconds each
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


@pytest.mark.slow  # whole simulated runs: seconds each
def test_the_replay_check_catches_an_sdk_that_answers_new_code_from_old_records(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The value check can fail: an SDK without the replay check hands the redeployed
    ``deploy`` the result ``charge`` recorded at position 1 as if ``refund`` had returned it,
    and the execution resolves with a value its steps did not produce. (The first seed in
    which a worker with the new code resumes the execution after ``charge`` was recorded;
    which seed that is changes whenever the workflows do.)"""
    monkeypatch.setattr(Call, "mismatch", lambda self, tags: None)
    for seed in range(40):
        result = Simulation(seed).run()
        if result.outcome[CHANGED] == ("resolved", "refunded 110, 220"):
            break
    else:
        pytest.fail("no seed of the first 40 redeploys in the middle of deploy")
    assert result.outcome[CHANGED] == ("resolved", "refunded 110, 220")
    found = problems(result, None)
    assert any("but its steps give ('resolved', 'charged 110, 220')" in p for p in found), found


def test_the_ledger_catches_an_sdk_that_records_an_unencodable_value_as_a_success(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The produced-value check can fail: a codec that writes an error in place of a value
    it cannot encode (the SDK's old behaviour) records a result no run produced. (The root
    computes its value from that record faithfully; the step's record is what is wrong.)"""

    strict = codec._enc_hook

    def lenient(obj: object) -> object:
        try:
            return strict(obj)
        except NotImplementedError as e:
            return error_to_json(e)

    monkeypatch.setattr(codec, "_enc_hook", lenient)
    found = problems(Simulation(3, Faults.none()).run(), None)
    assert any(p.startswith("unstorable:1: recorded resolved") for p in found), found


@pytest.mark.slow  # a second Python process runs a whole simulation
def test_a_seed_runs_the_same_in_another_process() -> None:
    """``SIM_SEED`` reproduces a failure in a new process, whose string hashing (and so any
    set's order) differs: nothing in the run may depend on it."""
    here = hashlib.sha256("\n".join(Simulation(33).run().trace).encode()).hexdigest()
    script = (
        "import hashlib, sys; sys.path.insert(0, sys.argv[1]);"
        "from tests.sdk.simulation.simulator import Simulation;"
        "trace = Simulation(33).run().trace;"
        "print(hashlib.sha256(chr(10).join(trace).encode()).hexdigest())"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    root = str(Path(__file__).resolve().parents[3])
    there = subprocess.run(
        [sys.executable, "-c", script, root], env=env, capture_output=True, text=True, check=True
    )
    assert there.stdout.strip() == here
