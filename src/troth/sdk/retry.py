"""Retry policies: how long to wait before attempt ``n + 1`` after attempt ``n`` failed.

Retries run in the process that holds the task (as the Python reference SDK does): the
lease is kept alive by the heartbeat while a step waits, and no retry is started whose
wait would end past the step's promise deadline, because the server would have timed
the promise out by then.

Defaults follow the reference SDKs: a plain function retries with ``Exponential()``
(1 s, doubling, capped at 30 s, unbounded attempts); a durable function (one that takes a
``Context``) never retries as a whole, because each of its own steps already retries.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

Duration = float | timedelta
"""A wait: seconds, or a ``timedelta``."""


def _s(duration: Duration) -> float:
    return duration.total_seconds() if isinstance(duration, timedelta) else float(duration)


def _checked(policy: object, *fields: str) -> None:
    for name in fields:
        value = getattr(policy, name)
        if isinstance(value, bool) or not isinstance(value, int | float | timedelta):
            raise TypeError(f"{name} is seconds or a timedelta, not {value!r}")
        if _s(value) < 0:
            raise ValueError(f"{name} must not be negative, not {value!r}")


class RetryPolicy:
    """Waits are seconds or ``timedelta``s: ``Exponential(base=timedelta(seconds=2))``."""

    max_attempts: int | None = None

    def delay(self, attempt: int) -> float | None:
        """Seconds to wait after failed attempt ``attempt`` (1-based), or None to give up."""
        if self.max_attempts is not None and attempt >= self.max_attempts:
            return None
        return self._delay(attempt)

    def _delay(self, attempt: int) -> float:
        raise NotImplementedError


@dataclass(frozen=True)
class Exponential(RetryPolicy):
    """``min(base * factor ** (attempt - 1), max_delay)``; no jitter, as in the references."""

    base: Duration = 1.0
    factor: float = 2.0
    max_delay: Duration = 30.0
    max_attempts: int | None = None

    def __post_init__(self) -> None:
        _checked(self, "base", "max_delay")

    def _delay(self, attempt: int) -> float:
        return min(_s(self.base) * self.factor ** (attempt - 1), _s(self.max_delay))


@dataclass(frozen=True)
class Linear(RetryPolicy):
    """``step * attempt``, capped at ``max_delay``."""

    step: Duration = 1.0
    max_delay: Duration = 30.0
    max_attempts: int | None = None

    def __post_init__(self) -> None:
        _checked(self, "step", "max_delay")

    def _delay(self, attempt: int) -> float:
        return min(_s(self.step) * attempt, _s(self.max_delay))


@dataclass(frozen=True)
class Constant(RetryPolicy):
    interval: Duration = 1.0
    max_attempts: int | None = None

    def __post_init__(self) -> None:
        _checked(self, "interval")

    def _delay(self, attempt: int) -> float:
        return _s(self.interval)


@dataclass(frozen=True)
class Never(RetryPolicy):
    max_attempts: int | None = 1

    def _delay(self, attempt: int) -> float:
        return 0.0


def default_policy(durable: bool) -> RetryPolicy:
    """The policy of a function registered or called without one: a plain function retries
    with ``Exponential()``; a durable one ``Never()`` retries as a whole."""
    return Never() if durable else Exponential()


def next_retry(
    policy: RetryPolicy,
    attempt: int,
    error: BaseException,
    non_retryable: tuple[type[BaseException], ...],
    now_ms: int,
    deadline_ms: int,
) -> float | None:
    """Seconds to wait before retrying after ``error``, or None when the failure is final.

    Final when the error's type is non-retryable, the policy gives up, or the retry would
    start at or after the promise's deadline.
    """
    if isinstance(error, non_retryable):
        return None
    wait = policy.delay(attempt)
    if wait is None or now_ms + wait * 1000 >= deadline_ms:
        return None
    return wait
