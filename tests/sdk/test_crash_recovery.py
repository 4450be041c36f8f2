"""Crash recovery with real processes: ``kill -9`` a worker mid-workflow, start a fresh
one, and the workflow finishes with every finished step having run exactly once.

Runs ``examples/crash_recovery.py`` embedded (the same SQLite file) and against
``troth serve``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

# Slow: every test runs workflows in processes of their own and kills or stops them.
pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "crash_recovery.py"


def ledger(path: Path) -> Counter[str]:
    return Counter(path.read_text().splitlines()) if path.exists() else Counter()


@pytest.mark.parametrize("mode", ["embedded", "remote"])
def test_a_killed_workflow_finishes_in_a_new_process_without_repeating_steps(
    mode, tmp_path, request
):
    env = {**os.environ, "STEP_SECONDS": "0.1", "LEDGER": str(tmp_path / "ledger")}
    env["PYTHONUNBUFFERED"] = "1"
    if mode == "remote":
        env["TROTH_URL"] = request.getfixturevalue("server").url
    else:
        env["TROTH_DB"] = str(tmp_path / "troth.db")
    first = subprocess.Popen(
        [sys.executable, str(EXAMPLE)], cwd=tmp_path, env={**env, "HANG_AT": "2"},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while ledger(tmp_path / "ledger")["start 2"] == 0:
            assert first.poll() is None, first.stdout.read().decode()
            assert time.monotonic() < deadline, "the first process never reached step 2"
            time.sleep(0.05)
    finally:
        first.kill()  # SIGKILL: no cleanup, no release, the lease just stops being renewed
        first.wait()
    assert ledger(tmp_path / "ledger") == {"start 0": 1, "done 0": 1, "start 1": 1,
                                           "done 1": 1, "start 2": 1}  # fmt: skip

    second = subprocess.run(
        [sys.executable, str(EXAMPLE)], cwd=tmp_path, env=env, capture_output=True, timeout=60
    )
    assert second.returncode == 0, second.stderr.decode()
    assert "total 30" in second.stdout.decode()
    steps = ledger(tmp_path / "ledger")
    assert all(steps[f"done {n}"] == 1 for n in range(5)), steps
    assert steps["start 2"] == 2  # the step that was cut off runs again; no other does
    assert sum(steps[f"start {n}"] for n in range(5)) == 6
