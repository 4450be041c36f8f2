"""``GET /ready`` says not ready while writes fail, and ready again once they work.

Before, ``/ready`` only pinged storage with a read, which a full disk still answers: it
stayed 200 while every write failed. Here the database lives on a small tmpfs that the test
fills up, as a full disk would be."""

from __future__ import annotations

import base64
import contextlib
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.servers import TrothServer

# Slow: a troth serve process per test (tests/conformance covers the server in the fast suite).
pytestmark = pytest.mark.slow


@pytest.fixture
def small_disk(tmp_path: Path):
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)])
    if done.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(directory: Path) -> Path:
    """Take every free byte of the file system ``directory`` is on."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\0" * 4096)
    finally:
        os.close(fd)
    return filler


def test_ready_reports_failing_writes_and_recovers(small_disk: Path, tmp_path: Path):
    server = TrothServer(small_disk / "t.db", tmp_path / "server.log", (), {}).start()
    try:
        assert server.http.get("/ready").status_code == 200
        filler = fill(small_disk)
        value = {"data": base64.b64encode(os.urandom(48 * 1024)).decode()}
        statuses = [
            server.send("promise.create", {"id": f"p{i}", "timeoutAt": 2**40, "param": value})
            .status_code
            for i in range(40)
        ]
        assert 500 in statuses, statuses  # the disk is full: writes fail
        assert server.http.get("/ready").status_code == 503
        filler.unlink()
        deadline = time.monotonic() + 10
        while server.http.get("/ready").status_code != 200:
            assert time.monotonic() < deadline, "never ready again after the disk was freed"
            time.sleep(0.1)
        status = server.send("promise.create", {"id": "after", "timeoutAt": 2**40}).status_code
        assert status == 200
    finally:
        server.close()
