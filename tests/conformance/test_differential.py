"""The real server against the oracle: seeded random request sequences, compared every step.

The same workload stream goes to a live ``troth serve --debug`` over HTTP and to a fresh
oracle. After every request both response envelopes must be equal (message strings too:
both go through ``troth.protocol``), and so must both ``debug.snap`` answers. The server's
snapshots must also keep every state property, and each step from one to the next every
transition property of the catalogue.

Why the outboxes can be compared as they are: the server removes an outbox row only once a
poll connection took it or its HTTP push target answered 2xx. This test opens no poll
connection, and the workload's only HTTP address (``http://localhost:9/hook``: port 9 is
the discard service, closed or silent, never an HTTP 2xx) takes no push, so no row is ever
delivered and both outboxes hold exactly what the machine enqueued. Superseding is the
machine's keyed upsert in both. So no normalization is needed: a difference anywhere is a
divergence.

The timeouts loop is paused (``debug.start``): deadlines fire only through ``debug.tick``,
at the workload's instants, which lie years before the wall clock.

troth's own kind, ``task.fences``, is judged by its definition rather than by the oracle's
handler for it: the oracle answers the batch's fences as standard ``task.fence`` requests,
one by one, and fence i of the server's answer must equal the oracle's answer to fence i
with its preload replaced by ``[]`` (``tests.support.fences``); a batch the doors refuse
must get the oracle's 400 for it, having changed nothing. The transition properties hold
for each fence of the batch: they are checked along the oracle's state after each fence,
which ends in the state the server's snapshot must equal.

A failure names the seed, the step, the request, both answers and the snapshot difference,
so ``run(machine, seed, steps)`` reproduces it.
"""

from __future__ import annotations

import itertools
import json
import time
from collections import Counter

import pytest

from tests.support.fences import Envelope, Machine, as_fences, one_by_one, refused
from tests.support.snapshots import from_wire
from tests.support.workload import VERSION, Workload
from troth.oracle import Oracle
from troth.oracle.invariants import check_state, check_step

from ._client import RETRY_TIMEOUT, HttpMachine

SEEDS = [pytest.param(seed, marks=pytest.mark.slow) for seed in range(5)]  # seconds each
STEPS = 2_000  # 10,000 steps per run, about 20,000 round trips


def snapshot_diff(server: Envelope, oracle: Envelope) -> str:
    """The rows each snapshot part holds on one side only (or the whole answers if not 200)."""
    if server["head"]["status"] != 200 or oracle["head"]["status"] != 200:
        return f"  server: {json.dumps(server)}\n  oracle: {json.dumps(oracle)}"
    lines = []
    for part in sorted(server["data"].keys() | oracle["data"].keys()):
        ours, theirs = server["data"].get(part), oracle["data"].get(part)
        if ours == theirs:
            continue
        if not (isinstance(ours, list) and isinstance(theirs, list)):
            lines.append(f"  {part}: server {json.dumps(ours)} oracle {json.dumps(theirs)}")
            continue
        lines += [f"  {part} server only: {json.dumps(r)}" for r in ours if r not in theirs]
        lines += [f"  {part} oracle only: {json.dumps(r)}" for r in theirs if r not in ours]
        if all(r in theirs for r in ours) and all(r in ours for r in theirs):
            lines.append(f"  {part}: same rows, other order or multiplicity")
    return "\n".join(lines)


def run(server: Machine, seed: int, steps: int, oracle: Machine | None = None) -> Counter[int]:
    """``steps`` workload requests to both machines; the statuses the server answered.

    ``server`` must be empty, its timeouts loop paused.
    """
    oracle = oracle or Oracle(retry_timeout=RETRY_TIMEOUT)
    workload = Workload(seed)
    snap_request = workload.snap_request()
    before = from_wire(server.apply(snap_request)["data"])
    oracle.apply(snap_request)
    statuses: Counter[int] = Counter()

    def fail(step: int, request: Envelope, what: str) -> None:
        pytest.fail(f"seed {seed}, step {step}: {json.dumps(request)}\n{what}", pytrace=False)

    for step in range(steps):
        request = next(workload)
        got = server.apply(request)
        want, passed = one_by_one(oracle, request)
        if got != want:
            fail(step, request, f"server: {json.dumps(got)}\noracle: {json.dumps(want)}")
        workload.observe(request, got)
        statuses[got["head"]["status"]] += 1

        snap_request = workload.snap_request()
        got_snap, want_snap = server.apply(snap_request), oracle.apply(snap_request)
        if got_snap != want_snap:
            diff = snapshot_diff(got_snap, want_snap)
            fail(step, request, f"answered {json.dumps(got)}\nsnapshots differ:\n{diff}")
        workload.observe(snap_request, got_snap)

        after = from_wire(got_snap["data"])
        violations = check_state(after, workload.now)
        for start, end in itertools.pairwise([before, *passed, after]):
            # Nothing is delivered here (see above), so the outbox checks apply in full.
            violations += check_step(
                start, end, workload.now, outbox_retained=True, retry_timeout=RETRY_TIMEOUT
            )
        if violations:
            listing = "\n".join(f"  {v.name} {v.ids}: {v.detail}" for v in violations)
            fail(step, request, f"answered {json.dumps(got)}\nserver state breaks:\n{listing}")
        before = after
    return statuses


@pytest.fixture(scope="module")
def statuses() -> Counter[int]:
    return Counter()


@pytest.mark.parametrize("seed", SEEDS)
def test_server_answers_and_stores_what_the_oracle_does(
    seed: int, machine: HttpMachine, statuses: Counter[int]
) -> None:
    machine.fresh()
    started = time.perf_counter()
    statuses += run(machine, seed, STEPS)
    elapsed = time.perf_counter() - started
    print(f"seed {seed}: {STEPS} steps in {elapsed:.1f}s ({STEPS / elapsed:.0f} steps/s)")


def test_a_short_run_answers_and_stores_what_the_oracle_does(machine: HttpMachine) -> None:
    """The fast suite's share of the comparison: the first steps of one seed."""
    machine.fresh()
    run(machine, 0, 200)


@pytest.mark.slow  # a tally of the slow seeds above
def test_the_runs_reached_every_status(statuses: Counter[int]) -> None:
    """A run that only ever got 200s (or 400s) compared little."""
    if statuses.total() < len(SEEDS) * STEPS:
        pytest.skip("needs the full differential run of this module")
    for status in (200, 300, 400, 404, 409, 422):
        assert statuses[status] > 0, f"no {status} in {statuses}"


# -- the comparison can fail ------------------------------------------------------------------


def test_a_machine_with_another_retry_timeout_fails_with_seed_step_and_diff() -> None:
    """Two oracles a millisecond apart in retry timeout: the run must name the first step."""
    with pytest.raises(pytest.fail.Exception) as failure:
        run(Oracle(retry_timeout=5001), 0, STEPS, Oracle(retry_timeout=5000))
    report = str(failure.value)
    assert report.startswith("seed 0, step ")
    assert "snapshots differ" in report
    assert "taskTimeouts server only" in report and "taskTimeouts oracle only" in report


class Forgetful(Oracle):
    """Answers like the oracle, but its snapshots say every promise was created at 0."""

    def apply(self, envelope: Envelope) -> Envelope:
        answer = super().apply(envelope)
        if envelope["kind"] == "debug.snap":
            for promise in answer["data"]["promises"]:
                promise["createdAt"] = 0
        return answer


def test_a_machine_whose_snapshot_lies_fails_the_comparison() -> None:
    with pytest.raises(pytest.fail.Exception) as failure:
        run(Forgetful(), 1, STEPS)
    assert "promises server only" in str(failure.value)


class Preloading(Oracle):
    """Answers a batch of fences with each fence's preload, as if it were sent alone."""

    def apply(self, envelope: Envelope) -> Envelope:
        if envelope["kind"] != "task.fences" or refused(envelope):
            return super().apply(envelope)
        fences = [Oracle.apply(self, fence) for fence in as_fences(envelope)]
        head = {"corrId": envelope["head"]["corrId"], "status": 200, "version": VERSION}
        return {"kind": "task.fences", "head": head, "data": {"fences": fences}}


def test_a_batch_answered_with_preloads_fails_the_comparison() -> None:
    with pytest.raises(pytest.fail.Exception) as failure:
        run(Preloading(), 0, STEPS)
    report = str(failure.value)
    assert '"kind": "task.fences"' in report.splitlines()[0]
    assert '"preload": [{' in report


@pytest.mark.slow  # generates many workloads: seconds
def test_the_workload_sends_batches_of_every_shape() -> None:
    """Batches that pass and that are refused, pairs and longer ones, at held tasks."""
    workload = Workload(0)
    oracle = Oracle(retry_timeout=RETRY_TIMEOUT)
    seen: Counter[str] = Counter()
    for _ in range(STEPS):
        request = next(workload)
        answer, _ = one_by_one(oracle, request)
        workload.observe(request, answer)
        workload.observe(workload.snap_request(), oracle.apply(workload.snap_request()))
        if request["kind"] != "task.fences":
            continue
        if answer["head"]["status"] == 400:
            seen["refused"] += 1
            continue
        statuses = {fence["head"]["status"] for fence in answer["data"]["fences"]}
        seen["applied" if statuses == {200} else "fenced out"] += 1
        seen[f"{len(request['data']['actions'])} fences"] += 1
    assert all(seen[shape] > 0 for shape in ("refused", "applied", "fenced out", "2 fences"))
    assert seen["1 fences"] + seen["3 fences"] + seen["4 fences"] > 0
