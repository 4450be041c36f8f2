"""kill -9 in the middle of a stream of writes loses nothing acknowledged and leaves no
request half-applied: on PostgreSQL the transactions in flight roll back whole."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.crash import assert_survived
from tests.support.storage import Backend

pytestmark = pytest.mark.slow

ROOT = Path(__file__).parents[2]


def hammer_until_killed(backend: Backend, acknowledgements: int) -> list[tuple[str, ...]]:
    """Run the hammer, SIGKILL it after ``acknowledgements`` answers, return every
    acknowledged (step, id) it printed, including those still in the pipe."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.storage.hammer", backend.name, backend.target],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    assert child.stdout is not None
    lines: list[str] = []
    try:
        while len(lines) < acknowledgements:
            line = child.stdout.readline()
            assert line, f"the hammer died on its own (exit {child.poll()})"
            lines.append(line)
    finally:
        os.kill(child.pid, signal.SIGKILL)
    lines += child.stdout.readlines()
    child.wait()
    assert child.returncode == -signal.SIGKILL
    # A line cut short by the kill was never acknowledged in full; drop it.
    return [tuple(line.split()) for line in lines if line.endswith("\n")]


@pytest.mark.parametrize("acknowledgements", [150, 1200])
def test_a_killed_server_keeps_every_acknowledged_write_and_no_partial_one(
    backend: Backend, acknowledgements: int
) -> None:
    acked = hammer_until_killed(backend, acknowledgements)
    assert len(acked) >= acknowledgements

    async def reopen():
        service = backend.service()
        snap = await service.snapshot()
        await service.close()
        return snap

    snap = asyncio.run(reopen())
    assert_survived(snap, acked)
    backend.check_integrity()
