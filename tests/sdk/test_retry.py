"""Retry policies and the deadline rule."""

from __future__ import annotations

from datetime import timedelta

import pytest

from troth.sdk.retry import Constant, Exponential, Linear, Never, next_retry


def test_exponential_doubles_up_to_its_cap():
    policy = Exponential(base=1, factor=2, max_delay=5)
    assert [policy.delay(n) for n in range(1, 6)] == [1, 2, 4, 5, 5]


def test_linear_and_constant_delays():
    assert [Linear(step=0.5).delay(n) for n in (1, 2, 3)] == [0.5, 1.0, 1.5]
    assert [Constant(interval=2).delay(n) for n in (1, 5)] == [2, 2]


def test_max_attempts_counts_the_first_attempt():
    policy = Constant(interval=1, max_attempts=3)
    assert [policy.delay(n) for n in (1, 2, 3)] == [1, 1, None]
    assert Never().delay(1) is None


def test_a_retry_that_would_start_after_the_deadline_is_not_made():
    assert next_retry(Constant(interval=1), 1, ValueError(), (), 0, 1500) == 1
    assert next_retry(Constant(interval=1), 1, ValueError(), (), 600, 1500) is None


@pytest.mark.parametrize("error", [TypeError("t"), KeyError("k")])
def test_non_retryable_types_fail_at_once(error):
    assert next_retry(Exponential(), 1, error, (TypeError, LookupError), 0, 10**9) is None


def test_waits_may_be_timedeltas_and_mean_the_same_as_seconds() -> None:
    assert Exponential(base=timedelta(seconds=2), max_delay=timedelta(minutes=1)).delay(3) == 8
    assert Exponential(base=2, max_delay=60).delay(3) == 8
    assert Linear(step=timedelta(milliseconds=500)).delay(3) == 1.5
    assert Constant(interval=timedelta(minutes=2)).delay(1) == 120


def test_a_negative_or_mistyped_wait_is_refused_naming_the_field() -> None:
    with pytest.raises(ValueError, match="base"):
        Exponential(base=timedelta(seconds=-1))
    with pytest.raises(TypeError, match="interval"):
        Constant(interval="5s")  # type: ignore[arg-type]
