"""The SDK's Prometheus metrics, opt-in: ``Troth(metrics=registry)`` (docs/sdk.md#metrics).

An app given a ``prometheus_client.CollectorRegistry`` counts its runs, step attempts and
retries, and times its steps and replays, in that registry; the app's process serves it as
it likes (``prometheus_client.start_http_server(port, registry=registry)``). Without one
the app gets ``UNMEASURED``, whose hooks do nothing, and prometheus-client is never
imported: the choice is made once per app, as for tracing (``troth.sdk.observability``).

What is counted:

- a **run** is one run of an execution's function on a worker, from its first line: the
  first, and each resume after a suspension, a retry or a crash. It ends ``completed``
  (the function returned), ``failed`` (it raised; the retry policy decides what follows),
  ``suspended`` (it awaits a remote promise), ``rerun`` (canceled while running), ``aborted``
  (its lease was lost, it was halted or the worker stopped) or ``error`` (the worker could
  not finish it, the server unreachable);
- the **replay time** of a run that answered calls from their records: from its start to
  the last call so answered, the time spent catching up with its history;
- each **attempt** of a local step, timed, ``ok``, ``failed`` or ``interrupted`` (its run
  stopped under it), and each **retry** the step's policy grants;
- each **stall**: a stretch of a function's code that held the event loop past the stall
  threshold (``troth.sdk.stalls``), by function, with the seconds it held it.
"""

from __future__ import annotations

import contextlib
import functools
import time
from types import TracebackType
from typing import TYPE_CHECKING

from troth.sdk.extras import require

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

# A run's outcome by the type of what ended it (``troth.sdk.execution``), named for people.
_OUTCOMES = {
    "Done": "completed",
    "Failed": "failed",
    "Suspend": "suspended",
    "Rerun": "rerun",
    "Abort": "aborted",
}


class Metrics:
    """The hooks, as ``UNMEASURED`` answers them: nothing is counted."""

    def run_started(self, execution: object, function: str) -> None:
        """A run of ``execution`` (of ``function``) starts."""

    def run_finished(self, execution: object, outcome: object | None) -> None:
        """The run of ``execution`` ended with ``outcome`` (None: it raised)."""

    def replayed(self, execution: object) -> None:
        """A call of ``execution``'s run was answered from its settled record."""

    def step(self, step: str) -> contextlib.AbstractContextManager[None]:
        """Around one attempt of a local step (``step`` as the replay check names it:
        ``run:charge``)."""
        return contextlib.nullcontext()

    def retried(self, step: str) -> None:
        """The retry policy granted ``step`` another attempt."""

    def stalled(self, function: str, seconds: float) -> None:
        """Code of ``function`` held the event loop for ``seconds`` (a stall)."""


UNMEASURED = Metrics()


class PrometheusMetrics(Metrics):
    """The hooks, counting into ``registry``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        prometheus = require("prometheus_client", "metrics", "Troth(metrics=...)")
        Counter, Histogram = prometheus.Counter, prometheus.Histogram

        started = Counter(
            "troth_sdk_runs_started_total",
            "Runs of executions started on this worker, by function",
            ["function"],
            registry=registry,
        )
        finished = Counter(
            "troth_sdk_runs_finished_total",
            "Runs of executions ended, by function and outcome",
            ["function", "outcome"],
            registry=registry,
        )
        replay = Histogram(
            "troth_sdk_replay_seconds",
            "Time a run spent answering calls from their records before new work",
            ["function"],
            registry=registry,
        )
        attempts = Counter(
            "troth_sdk_step_attempts_total",
            "Attempts of local steps, by step and outcome (ok, failed, interrupted)",
            ["step", "outcome"],
            registry=registry,
        )
        retries = Counter(
            "troth_sdk_step_retries_total",
            "Retries of local steps granted by their retry policy",
            ["step"],
            registry=registry,
        )
        latency = Histogram(
            "troth_sdk_step_seconds",
            "Time of one attempt of a local step",
            ["step"],
            registry=registry,
        )
        stalls = Counter(
            "troth_sdk_loop_stalls_total",
            "Stretches of code that blocked the event loop past the stall threshold",
            ["function"],
            registry=registry,
        )
        stalled = Counter(
            "troth_sdk_loop_stalled_seconds_total",
            "Seconds the event loop was blocked by stalls",
            ["function"],
            registry=registry,
        )
        # A child per label values, made once: prometheus-client's ``labels`` validates and
        # locks on every call, several times the cost of the count itself.
        self._started = functools.cache(started.labels)
        self._finished = functools.cache(finished.labels)
        self._replay = functools.cache(replay.labels)
        self._attempts = functools.cache(attempts.labels)
        self._retries = functools.cache(retries.labels)
        self._latency = functools.cache(latency.labels)
        self._stalls = functools.cache(stalls.labels)
        self._stalled = functools.cache(stalled.labels)
        # Each run in progress: its function, its start, its last replayed call.
        self._runs: dict[int, tuple[str, float, float | None]] = {}

    def run_started(self, execution: object, function: str) -> None:
        self._started(function).inc()
        self._runs[id(execution)] = (function, time.perf_counter(), None)

    def run_finished(self, execution: object, outcome: object | None) -> None:
        run = self._runs.pop(id(execution), None)
        if run is None:
            return
        function, started, replayed = run
        label = "error" if outcome is None else _OUTCOMES.get(type(outcome).__name__, "error")
        self._finished(function, label).inc()
        if replayed is not None:
            self._replay(function).observe(replayed - started)

    def replayed(self, execution: object) -> None:
        run = self._runs.get(id(execution))
        if run is not None:
            self._runs[id(execution)] = (run[0], run[1], time.perf_counter())

    def step(self, step: str) -> _Attempt:
        return _Attempt(self, step)

    def retried(self, step: str) -> None:
        self._retries(step).inc()

    def stalled(self, function: str, seconds: float) -> None:
        self._stalls(function).inc()
        self._stalled(function).inc(seconds)


class _Attempt:
    """Times one step attempt and counts it by how it ended (a class, not a generator:
    this runs around every step)."""

    __slots__ = ("_metrics", "_started", "_step")

    def __init__(self, metrics: PrometheusMetrics, step: str) -> None:
        self._metrics = metrics
        self._step = step
        self._started = 0.0

    def __enter__(self) -> None:
        self._started = time.perf_counter()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        metrics = self._metrics
        metrics._latency(self._step).observe(time.perf_counter() - self._started)
        if kind is None:
            outcome = "ok"
        elif issubclass(kind, Exception):
            outcome = "failed"
        else:
            outcome = "interrupted"  # the run stopped under it (its lease, the worker)
        metrics._attempts(self._step, outcome).inc()
