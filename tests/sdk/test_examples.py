"""Every example runs with one command in embedded mode and does what it says."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

# Slow: each test runs an example script in a process of its own.
pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run(tmp_path: Path, name: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py"), *args],
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if not k.startswith("TROTH_")},
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert (tmp_path / "troth.db").exists()  # embedded, in the working directory
    return done.stdout.decode()


def test_hello_runs_its_step_once_even_when_run_twice(tmp_path):
    first = run(tmp_path, "hello", "ana")
    assert "running the step" in first and "Hello, ana!" in first
    second = run(tmp_path, "hello", "ana")
    assert "running the step" not in second and "Hello, ana!" in second


def test_fan_out_gathers_every_child(tmp_path):
    assert "10 words, 85 letters" in run(tmp_path, "fan_out")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((), "booked: ['flight-t1', 'hotel-t1', 'car-t1']"),
        (("t2", "--fail-car"), "cancelled hotel-t2\n  cancelled flight-t2\ntrip t2 rolled back"),
    ],
)
def test_saga_compensates_in_reverse_order(tmp_path, args, expected):
    assert expected in run(tmp_path, "saga", *args)


@pytest.mark.parametrize(
    ("args", "reason"),
    [(("o1",), "the customer changed their mind"), (("o2", "--timeout"), "timed out")],
)
def test_cancellation_cleans_up_the_child_first_then_the_order(tmp_path, args, reason):
    out = run(tmp_path, "cancellation", *args)
    order = args[0]
    assert out.index(f"reserved stock for {order}") < out.index(f"released stock for {order}")
    assert out.index(f"released stock for {order}") < out.index(f"refunded receipt-{order}")
    assert f"order {order} canceled: " in out and reason in out


@pytest.mark.parametrize(("flag", "expected"), [((), "paid"), (("--reject",), "refused")])
def test_approval_waits_for_the_external_promise(tmp_path, flag, expected):
    out = run(tmp_path, "approval", "e1", *flag)
    assert "approval requested" in out and f"expense e1: {expected}" in out


def test_countdown_sleeps_durably_between_ticks(tmp_path):
    out = run(tmp_path, "countdown", "2", "0.2")
    assert out.index("2...") < out.index("1...") < out.index("liftoff!")
    assert "counted down from 2" in out
