"""kill -9 in the middle of a stream of writes loses nothing acknowledged and leaves no
request half-applied."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.crash import assert_survived
from troth.storage.sqlite import SqliteService, connect

HAMMER = Path(__file__).with_name("hammer.py")
LISTENER = "poll://uni@watchers/1"


def hammer_until_killed(path: Path, acknowledgements: int) -> list[tuple[str, str]]:
    """Run the hammer, SIGKILL it after ``acknowledgements`` answers, return every
    acknowledged (step, id) it printed, including those still in the pipe."""
    child = subprocess.Popen(
        [sys.executable, str(HAMMER), str(path)], stdout=subprocess.PIPE, text=True
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
    tmp_path: Path, acknowledgements: int
) -> None:
    path = tmp_path / "crash.db"
    acked = hammer_until_killed(path, acknowledgements)
    assert len(acked) >= acknowledgements

    async def reopen():
        service = SqliteService(str(path))
        snap = await service.snapshot()
        await service.close()
        return snap

    snap = asyncio.run(reopen())
    assert_survived(snap, acked)

    conn = connect(str(path))
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    conn.close()
