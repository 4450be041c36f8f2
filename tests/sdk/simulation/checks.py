"""What a finished run is held to, and how a failure is reported.

Effects of steps (the ledger against the server's record):

- No step starts after its result was recorded, on any worker: once a step's promise is
  settled, its effect is never observed again. Before that it may start (and even finish)
  several times — a crash, a graceful stop past its grace period, a lapsed lease or a lost
  reply cuts a run short between the effect and its record — which is what durable
  execution promises and no more: "exactly once" means *no effect after the record*, not
  one ``done`` per step. (Durable functions re-run on every replay by design; their
  ``enter`` entries are in the ledger for the trace, not judged.)
- Only the step a promise records runs under its id: every ``start`` under a step's
  promise is of the function its ``troth:step`` tag names (a shifted numbering, or new
  code answered from old records, would run one step under another's promise). A step
  that certainly did not exist yet starts before its promise is created (the SDK records
  it after it ran: ``troth.sdk.recording``), so a run cut off inside it leaves a ``start``
  under an id with no promise, or one that a later run recorded. Such a start is judged
  by what can be known: its id is a call's (a child of an existing promise), and a
  different function recorded there later must be another code's (the changed workflow,
  recorded by another process); same code, another function at that position, is a
  shifted numbering.
- A recorded result was produced by a run of that step before it was recorded: a
  resolved step holds the value of one of its ``done`` entries; a rejected one the error of
  one of its ``fail`` entries, or ``UnstorableValueError`` after a ``done`` (the value could
  not be recorded), or ``AttemptInterruptedError`` after a ``start`` (cut off).

Values of executions:

- Every settled execution holds what its function computes from the values recorded for
  its calls: the function is run again against its records (``Replay``), checking that each
  call it makes is the recorded one (kind, function, argument digest), and recursively for
  durable children (``ctx.run`` of a durable function, ``rpc``). So no execution returns a
  value its steps did not produce.
- The outcome — every promise's state and value — equals the uninterrupted run's, except
  for the changed workflow (``deploy``), whose code differs between workers: it must end
  with the result of the code that recorded its call at position 1, or halted by a worker
  whose code differs from that record, its promise still pending.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import re
from collections.abc import Callable, Generator
from typing import Any

from troth.protocol.conventions import ARGS_TAG, STEP_TAG
from troth.protocol.ids import child_id, descends
from troth.sdk import errors
from troth.sdk.codec import Codec
from troth.sdk.execution import RUN_TAG
from troth.sdk.registry import function_name, invocation_data, takes_context
from troth.sdk.replay import digest
from troth.sdk.saga import Saga

from .simulator import START, Result
from .workflows import CHANGED, LEAVES, MAX_VALUE_BYTES, ROOTS, VERSIONS

TRACE_TAIL = 120
LEAF_STEPS = {f"run:{function_name(fn)}" for fn in LEAVES}


def problems(result: Result, baseline: Result | None) -> list[str]:
    """Everything wrong with ``result``: a failure during the run, a repeated or misplaced
    effect, a value no run produced, and (given the uninterrupted run) an outcome that
    differs from it."""
    found = [f"the run failed: {result.error}"] if result.error is not None else []
    found += exactly_once_violations(result)
    found += unproduced_results(result)
    if result.error is None:
        found += replay_differences(result)
        found += changed_code_problems(result)
    if baseline is not None and result.error is None:
        found += outcome_differences(result, baseline)
    return found


def exactly_once_violations(result: Result) -> list[str]:
    problems = []
    for entry in result.ledger:
        if entry.event != "start":
            continue
        created = result.created.get(entry.key)
        if created is None or created > entry.order:  # ran before it was recorded
            if not _a_call(result, entry.key):
                problems.append(f"{entry.key}: ran, but no call has this id (wrong key?)")
                continue
            if created is None or _another_code(result, entry):
                continue
        step = result.step_promises[entry.key]
        if not step.startswith("run:"):
            problems.append(f"{entry.key}: a step whose promise is not a run: step")
        elif step != f"run:{entry.value}":
            problems.append(
                f"{entry.key}: {entry.value} ran on {entry.worker} at {entry.time - START} ms "
                f"under the promise of {step!r}"
            )
        settled = result.settled.get(entry.key)
        if settled is not None and entry.order > settled:
            problems.append(
                f"{entry.key}: {entry.event} on {entry.worker} at {entry.time - START} ms, "
                "after its result was recorded"
            )
    return problems


def _a_call(result: Result, key: str) -> bool:
    """``key`` is the id of a call of an existing promise: ``<parent>:<n>`` or
    ``<parent>.<n>``."""
    return any(
        key == child_id(parent, key[len(parent) + 1 :]) and key[len(parent) + 1 :].isdigit()
        for parent in result.outcome
        if key.startswith(parent) and len(key) > len(parent) + 1
    )


def _another_code(result: Result, entry: Any) -> bool:
    """The promise ``entry`` ran under (before it was recorded) was recorded by another
    process running the changed workflow's other code."""
    root = entry.key.split(":", 1)[0]
    recorder = result.tags[entry.key].get(RUN_TAG, "").split("/", 1)[0]
    return root == CHANGED and recorder != entry.worker


def unproduced_results(result: Result) -> list[str]:
    """Recorded step results that no run of the step produced before they were recorded."""
    before: dict[str, list[tuple[str, str | None]]] = {}
    for entry in result.ledger:
        settled = result.settled.get(entry.key)
        if entry.event != "enter" and settled is not None and entry.order < settled:
            before.setdefault(entry.key, []).append((entry.event, entry.value))
    problems = []
    for id, step in result.step_promises.items():
        if step not in LEAF_STEPS or id not in result.settled:
            continue
        state, value = result.outcome[id]
        runs = before.get(id, [])
        if state == "resolved":
            ok = ("done", digest(value)) in runs
        elif state == "rejected" and value[0] == "UnstorableValueError":
            ok = any(event == "done" for event, _ in runs)
        elif state == "rejected" and value[0] == "AttemptInterruptedError":
            ok = any(event == "start" for event, _ in runs)
        elif state == "rejected":
            ok = ("fail", value[0]) in runs
        else:
            ok = True  # timed out or canceled: no run needed
        if not ok:
            problems.append(f"{id}: recorded {state} {value!r}, which no run produced ({runs})")
    return problems


# -- the executions' values, recomputed from their records -----------------------------------


class Unrecorded(BaseException):
    """The function makes a call with no record (yet): it had not got this far."""


class Diverged(BaseException):
    """The function makes a call other than the one recorded at its position."""


class Replay:
    """A ``Context`` stand-in that answers every call from the run's records, runs no step,
    and refuses a call its record was not made by (as the SDK's replay check must)."""

    codec = Codec(max_value_bytes=MAX_VALUE_BYTES)

    def __init__(self, result: Result, id: str) -> None:
        self.result = result
        self.id = id
        self.children: list[tuple[str, Callable[..., Any], Any, dict[str, Any]]] = []
        self._seq = 0

    def options(self, **_: Any) -> Replay:
        return self  # options do not change which call is recorded where

    def shield(self) -> contextlib.AbstractAsyncContextManager[None]:
        return contextlib.nullcontext()  # a shield changes no record, only what runs

    def saga(self, *, parallel: bool = False) -> Saga:
        return Saga(self, parallel)  # type: ignore[arg-type]  # the SDK's own, over records

    def run(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Answer:
        id = self._call("run", function_name(fn), digest(args, kwargs))
        if takes_context(fn) and fn not in LEAVES:  # leaves: judged by their ledger
            self.children.append((id, fn, args, kwargs))
        return Answer(self.result, id)

    def rpc(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Answer:
        # As the SDK does, before the call takes a position: the invocation must be storable.
        self.codec.encode(invocation_data(function_name(fn), 1, args, kwargs))
        id = self._call("rpc", function_name(fn), digest(args, kwargs))
        self.children.append((id, fn, args, kwargs))
        return Answer(self.result, id)

    def sleep(self, seconds: float) -> Answer:
        return Answer(self.result, self._call("sleep", None, None))

    def promise(self, **_: Any) -> Answer:
        return Answer(self.result, self._call("promise", None, None))

    def _call(self, kind: str, name: str | None, args: str | None) -> str:
        id = child_id(self.id, str(self._seq))
        self._seq += 1
        tags = self.result.tags.get(id)
        if tags is None:
            raise Unrecorded(id)
        step = f"{kind}:{name}" if name else kind
        if tags.get(STEP_TAG) != step or tags.get(ARGS_TAG, args) != args:
            raise Diverged(f"{id}: the code calls {step} ({args}), the record {tags}")
        return id


class Answer:
    """A call's recorded outcome, awaited as the SDK would hand it to the function."""

    def __init__(self, result: Result, id: str) -> None:
        self.result = result
        self.id = id

    def __await__(self) -> Generator[Any, None, Any]:
        state, value = self.result.outcome[self.id]
        if state == "pending":
            raise Unrecorded(self.id)
        if state == "resolved":
            return value
        yield from ()  # a generator: ``await`` takes it as an awaitable
        raise rebuilt(*value)


def rebuilt(name: str, message: str) -> Exception:
    """The exception a workflow catches, from its recorded type name and message."""
    kind = getattr(builtins, name, None) or getattr(errors, name, None)
    if not (isinstance(kind, type) and issubclass(kind, Exception)):
        return errors.RemoteError(name, message)
    error = kind.__new__(kind)
    Exception.__init__(error, message)
    return error


def judge(
    result: Result, id: str, fn: Callable[..., Any], args: Any, kwargs: dict[str, Any]
) -> list[str]:
    """Problems with durable function ``fn``'s record ``id``, given the arguments it was
    called with: a settled one must hold what ``fn`` computes from its children's records
    (and so must each settled durable child, given the arguments the replay calls it with)."""
    state, value = result.outcome.get(id, ("missing", None))
    if state not in ("resolved", "rejected", "rejected_canceled"):
        return []  # pending (the run ended halted) or timed out: nothing to recompute
    replay = Replay(result, id)
    found: list[str] = []
    try:
        computed: tuple[str, Any] = ("resolved", _complete(fn(replay, *args, **kwargs)))
    except Unrecorded as e:
        found.append(f"{id}: settled {state}, but its call {e} was never settled")
    except Diverged as e:
        found.append(f"{id}: its records were made by other calls than its code's: {e}")
    except Exception as e:
        rejection = "rejected_canceled" if isinstance(e, errors.CanceledError) else "rejected"
        computed = (rejection, (type(e).__qualname__, str(e)))
    if not found and computed != (state, value):
        found.append(f"{id}: recorded {state} {value!r}, but its steps give {computed}")
    for child in replay.children:
        found += judge(result, *child)
    return found


def _complete(coroutine: Any) -> Any:
    """Run a replay to its end: every await is answered at once, but ``gather`` needs a loop."""
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coroutine)
    finally:
        loop.close()


def replay_differences(result: Result) -> list[str]:
    found = []
    for root in ROOTS:
        fn = root.fn
        if root.id == CHANGED:
            position1 = result.tags.get(child_id(root.id, "1"), {}).get(STEP_TAG)
            fn = VERSIONS.get(position1, fn)
        found += judge(result, root.id, fn, root.args, {})
    return found


def changed_code_problems(result: Result) -> list[str]:
    """The changed workflow ends with a result, or halted because of the change; and only
    a change halts a task."""
    found = [
        f"task {task} was halted by {pid}, but its code did not change"
        for pid, task in result.halts
        if task != CHANGED
    ]
    found += [f"task {task} ended halted" for task in result.halted if task != CHANGED]
    position1 = child_id(CHANGED, "1")
    recorded = result.tags.get(position1, {}).get(STEP_TAG)
    recorder_is_new = VERSIONS.get(recorded) is not VERSIONS["run:charge"]
    state, _ = result.outcome[CHANGED]
    if CHANGED in result.halted:
        if state != "pending":
            found.append(f"{CHANGED}: halted, but its promise is {state}")
        if recorded is None:
            found.append(f"{CHANGED}: halted before position 1 was recorded")
        halters = [pid for pid, task in result.halts if task == CHANGED]
        justified = [pid for pid in halters if (pid in result.redeployed) != recorder_is_new]
        if not justified:
            found.append(
                f"{CHANGED}: halted by {halters}, none of which runs other code than the one "
                f"that recorded {recorded!r} at position 1"
            )
    elif state == "pending":
        found.append(f"{CHANGED}: pending, and its task is not halted")
    return found


def outcome_differences(result: Result, baseline: Result) -> list[str]:
    ids = sorted(result.outcome.keys() | baseline.outcome.keys())
    differences = []
    for id in ids:
        if descends(id, CHANGED):
            continue  # judged by ``changed_code_problems`` and ``replay_differences``
        got, expected = result.outcome.get(id, "missing"), baseline.outcome.get(id, "missing")
        if _without_instants(got) != _without_instants(expected):
            differences.append(f"{id}: {got}, but {expected} uninterrupted")
    return differences


def _without_instants(outcome: Any) -> Any:
    """An outcome with the deadline instants in its error message left out: a deadline set
    from the time an execution started (``timed``'s) differs between seeds."""
    if isinstance(outcome, tuple) and isinstance(outcome[1], tuple):
        state, (name, message) = outcome
        return state, (name, _INSTANT.sub("at its deadline", message))
    return outcome


_INSTANT = re.compile(r"at its deadline \S+")


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
