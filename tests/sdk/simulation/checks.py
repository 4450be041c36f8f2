"""What a finished run is held to, and how a failure is reported.

- Exactly-once effect of finished steps: once a step's promise is settled on the server,
  the step never starts again, on any worker. Before that it may start several times — a
  crash, a lapsed lease or a lost reply cuts a run short — which is what durable execution
  promises and no more. (Durable functions re-run on every replay by design; their
  ``enter`` entries are in the ledger for the trace, not judged.)
- The outcome — every promise's state and value — equals the uninterrupted run's.
"""

from __future__ import annotations

from .simulator import START, Result

TRACE_TAIL = 120


def problems(result: Result, baseline: Result | None) -> list[str]:
    """Everything wrong with ``result``: a failure during the run, a repeated effect, and
    (given the uninterrupted run) an outcome that differs from it."""
    found = [f"the run failed: {result.error}"] if result.error is not None else []
    found += exactly_once_violations(result)
    if baseline is not None and result.error is None:
        found += outcome_differences(result, baseline)
    return found


def exactly_once_violations(result: Result) -> list[str]:
    problems = []
    for entry in result.ledger:
        if entry.event != "start":
            continue
        if entry.key not in result.outcome:
            problems.append(f"{entry.key}: ran, but no such promise exists (wrong key?)")
        elif entry.event == "start" and not result.step_promises[entry.key].startswith("run:"):
            problems.append(f"{entry.key}: a step whose promise is not a run: step")
        settled = result.settled.get(entry.key)
        if settled is not None and entry.order > settled:
            problems.append(
                f"{entry.key}: {entry.event} on {entry.worker} at {entry.time - START} ms, "
                "after its result was recorded"
            )
    return problems


def outcome_differences(result: Result, baseline: Result) -> list[str]:
    ids = sorted(result.outcome.keys() | baseline.outcome.keys())
    differences = []
    for id in ids:
        got, expected = result.outcome.get(id, "missing"), baseline.outcome.get(id, "missing")
        if got != expected:
            differences.append(f"{id}: {got}, but {expected} uninterrupted")
    return differences


def report(result: Result, problems: list[str]) -> str:
    """The seed, what went wrong, and the end of the trace: enough to start debugging."""
    tail = result.trace[-TRACE_TAIL:]
    return "\n".join(
        [
            f"seed {result.seed} ({result.faults}):",
            *(f"  {p}" for p in problems),
            f"last {len(tail)} of {len(result.trace)} trace lines (time in virtual ms):",
            *tail,
            f"reproduce: SIM_SEED={result.seed} pytest tests/sdk/simulation -q -s",
        ]
    )
