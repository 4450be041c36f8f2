"""What can go wrong in a durable execution, as exception types a user can catch.

Two families. *Outcomes* are ordinary ``Exception`` subclasses a workflow may catch and
handle: a child that timed out, was canceled, or failed in another process. *Control
signals* derive from ``BaseException`` on purpose, like ``asyncio.CancelledError``: they
must unwind the durable function even through a broad ``except Exception`` so that the SDK,
not the user's code, decides what happens to the task.
"""

from __future__ import annotations

import contextlib
import traceback
from datetime import UTC, datetime
from typing import Any, Literal


class TrothError(Exception):
    """Base of the SDK's ordinary, catchable errors."""


class TimedOutError(TrothError):
    """The awaited promise reached its deadline before anyone settled it.

    ``deadline`` is the instant (ms since the epoch) and ``source`` where it came from, as
    the promise recorded it (``troth.sdk.options.DeadlineSource``: ``option``,
    ``register``, ``app``, ``parent``), or None for a promise another SDK created.
    """

    def __init__(
        self, promise_id: str, deadline: int | None = None, source: str | None = None
    ) -> None:
        message = f"promise {promise_id!r} timed out"
        if deadline is not None:
            message += f" at its deadline {_instant(deadline)}"
        if source is not None:
            message += f", set by {_DEADLINE_SOURCES.get(source, repr(source))}"
        super().__init__(message)
        self.promise_id = promise_id
        self.deadline = deadline
        self.source = source


def _instant(ms: int) -> str:
    try:
        at = datetime.fromtimestamp(ms / 1000, tz=UTC)
    except (ValueError, OverflowError, OSError):  # past the year 9999: "no deadline"
        return f"{ms} ms since the epoch"
    return at.isoformat(timespec="milliseconds")


_DEADLINE_SOURCES = {
    "option": "the call's timeout option",
    "register": "the timeout its function was registered with",
    "app": "the app's default_timeout",
    "parent": "the deadline of the execution that called it",
}


class CanceledError(TrothError):
    """The awaited promise was canceled (settled ``rejected_canceled``), or the execution
    was asked to stop (``app.cancel``, see ``troth.sdk.cancellation``) and observes it here.

    ``reason`` is what the canceler gave: a string, an exception (``TimedOutError`` when
    an execution's ``grace`` period began), or None.
    """

    def __init__(self, promise_id: str, reason: str | BaseException | None = None) -> None:
        message = f"promise {promise_id!r} was canceled"
        if reason is not None:
            message += f": {reason}"
        super().__init__(message)
        self.promise_id = promise_id
        self.reason = reason


class RemoteError(TrothError):
    """A failure recorded by another execution whose exception type cannot be rebuilt here:
    a TypeScript error, or a Python class whose module this process has not imported.

    Carries what the failing side recorded: ``type_name`` (``module.qualname`` for a Python
    class, the ``name`` alone for a TypeScript error), its message, its traceback text, the
    exception's ``attributes`` (decoded as plain JSON) and, for an aggregate (a TypeScript
    ``AggregateError``, an ``ExceptionGroup`` that cannot be rebuilt here), its ``errors``,
    each decoded. ``record`` is the error record it was read from: raised again, it is
    written as that record, so a process where the class is loaded still rebuilds it.
    """

    def __init__(
        self,
        type_name: str,
        message: str,
        traceback: str | None = None,
        errors: list[Any] | None = None,
        *,
        attributes: dict[str, Any] | None = None,
        record: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(f"{type_name}: {message}" if type_name else message)
        self.type_name = type_name
        self.message = message
        self.remote_traceback = traceback
        self.errors: list[Any] = errors or []
        self.attributes: dict[str, Any] = attributes or {}
        self.record = record


class FunctionNotFoundError(TrothError):
    """A function name (and version) that this app has not registered."""

    def __init__(self, name: str, version: int | None = None) -> None:
        which = f"{name!r}" if version is None else f"{name!r} version {version}"
        super().__init__(f"no function {which} is registered")
        self.name = name
        self.version = version


class AlreadySettledError(TrothError):
    """A promise settled from outside was already settled otherwise: a settled promise keeps
    its first outcome (settling it the same way again is idempotent and raises nothing)."""

    def __init__(self, id: str, state: str, requested: str) -> None:
        super().__init__(
            f"promise {id!r} was already {state}"
            + (" with another value" if state == requested else "")
            + f"; not {requested} as asked"
        )
        self.id = id
        self.state = state
        self.requested = requested


class ServerError(TrothError):
    """The server answered a request with an unexpected status."""

    def __init__(self, kind: str, status: int, message: str) -> None:
        super().__init__(f"{kind} answered {status}: {message}")
        self.kind = kind
        self.status = status
        self.message = message


class NetworkError(TrothError):
    """The server could not be reached (an infrastructure failure, not an answer)."""


class UnstorableValueError(TrothError):
    """A value cannot be recorded: the codec cannot encode it, or it is over the payload
    limit. Never retried: the same value fails the same way on every attempt."""


class AttemptInterruptedError(TrothError):
    """An attempt of a step was cut off (its process stopped) before it recorded an outcome.

    It counts as an attempt, so a retry policy's bound holds across crashes; when the policy
    allows another attempt the step is retried like after any failure.
    """

    def __init__(self, step_id: str, attempt: int, cause: str | None = None) -> None:
        because = f": {cause}" if cause else ""
        super().__init__(
            f"attempt {attempt} of step {step_id!r} was interrupted before it recorded an "
            f"outcome{because}"
        )
        self.step_id = step_id
        self.attempt = attempt
        self.cause = cause


# -- control signals ------------------------------------------------------------------------


class ExecutionSignal(BaseException):
    """Unwinds a durable function; the worker loop, not user code, acts on it."""


class Suspended(ExecutionSignal):
    """The function awaits a promise that is still pending: suspend and wait for a resume."""


class Aborted(ExecutionSignal):
    """The execution cannot go on in this process (lease lost, server unreachable, ...)."""


class LeaseLost(Aborted):
    """A task operation answered 404/409: another process holds the task now. Benign."""


class Stopping(Aborted):
    """The worker is stopping: no new durable call starts; the task is released."""


class MustHalt(ExecutionSignal):
    """The execution cannot go on until an operator acts: its task is halted, with this
    signal's message recorded as the reason (``HaltedError.reason``)."""


class CodeError(MustHalt):
    """A durable function's own code raised a programming error (a ``TypeError``, a
    ``NameError``, ...: ``Troth(halt_on=...)``). Rejecting the execution would use its id
    up for a bug that a fix can mend, so the task halts with the traceback as the reason;
    once the code is fixed, resuming replays the recorded steps and runs on."""

    def __init__(self, execution_id: str, error: BaseException) -> None:
        trace = "".join(traceback.format_exception(error)).strip()
        if len(trace) > MAX_TRACE_CHARS:
            trace = "... " + trace[-MAX_TRACE_CHARS:]
        super().__init__(
            f"execution {execution_id!r} raised {type(error).__name__} in its own code; the "
            f"task is halted: fix the code, then resume the execution\n{trace}"
        )
        self.error = error


MAX_TRACE_CHARS = 4000  # the end of a long traceback, where the error is

_RECORDED = "__troth_recorded__"


def mark_recorded(error: BaseException) -> None:
    """Mark ``error`` as a durable call's recorded failure, raised again in the workflow:
    it is the outcome of a step, not a bug of the workflow's own code (``CodeError``)."""
    # An exception type with __slots__ and no room for it stays unmarked.
    with contextlib.suppress(AttributeError):
        setattr(error, _RECORDED, True)


def recorded(error: BaseException) -> bool:
    return bool(getattr(error, _RECORDED, False))

DEFAULT_HALT_ON: tuple[type[BaseException], ...] = (
    TypeError,
    NameError,
    AttributeError,
    ImportError,
    SyntaxError,
)
"""The programming errors that halt an execution when its own code raises them."""


class LeaseLossesExceeded(MustHalt):
    """A step's attempts were cut off by lost leases ``losses`` times in a row, the bound of
    ``Troth(max_lease_losses=...)``: running it again would most likely lose it again (and
    repeat its effects), so the task halts with the causes instead."""

    def __init__(self, execution_id: str, step_id: str, function: str, causes: list[str]):
        attempts = "; ".join(f"attempt {n}: {cause}" for n, cause in enumerate(causes, 1))
        super().__init__(
            f"step {function} ({step_id!r}) of execution {execution_id!r} lost its lease "
            f"{len(causes)} times in a row ({attempts}); the task is halted: fix the step "
            f"(or raise the lease), then resume the execution"
        )
        self.execution_id = execution_id
        self.step_id = step_id
        self.causes = causes


class NonDeterminismError(MustHalt):
    """A replay met a recorded step that a different call made (see ``troth.sdk.replay``).

    The execution is not advanced: its task is halted so that an operator sees it, fixes the
    code (or deploys the old version) and resumes it with ``task.continue``.
    """

    def __init__(self, execution_id: str, child_id: str, reason: str) -> None:
        super().__init__(
            f"non-determinism in execution {execution_id!r} at {child_id!r}: {reason}; "
            f"the task is halted until the code matches its history (then task.continue)"
        )
        self.execution_id = execution_id
        self.child_id = child_id
        self.reason = reason


# -- what a caller learns about an execution (ordinary, catchable errors) -------------------


class IdempotencyConflictError(TrothError):
    """An execution id is already taken by other work: another function, or the same
    function with other arguments. Starting the same function with the same arguments
    joins the existing execution instead.

    ``differs`` is ``"function"`` or ``"arguments"``; ``recorded`` and ``requested`` are the
    two function names, or the two argument digests (``troth.sdk.replay.digest``).
    """

    def __init__(
        self, id: str, differs: Literal["function", "arguments"], recorded: str, requested: str
    ) -> None:
        if differs == "function":
            what = f"function {recorded!r}, not {requested!r}"
        else:
            what = f"other arguments (digest {recorded}, not {requested})"
        super().__init__(
            f"execution {id!r} already exists with {what}; choose another id for other work"
        )
        self.id = id
        self.differs = differs
        self.recorded = recorded
        self.requested = requested


class HaltedError(TrothError):
    """The execution is halted: a replay diverged from its history, or a step lost its lease
    again and again (``reason``, the ``NonDeterminismError`` or ``LeaseLossesExceeded``
    message, or None if no reason was recorded). It waits, unchanged, until its cause is
    fixed (code that matches its history deployed, the step fixed) and it is resumed with
    ``app.executions.resume(id)``."""

    def __init__(self, id: str, reason: str | None) -> None:
        super().__init__(
            f"execution {id!r} is halted: {reason or 'no reason was recorded'}. Fix the "
            f"cause, then resume it with app.executions.resume({id!r})"
        )
        self.id = id
        self.reason = reason
