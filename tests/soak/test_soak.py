"""The soak test's short form: ``bench/soak.py`` for under a minute of load on each backend,
with the server killed with SIGKILL, workers killed, PostgreSQL restarted (pg) and a push
target failing; the script audits the end state and exits non-zero on any problem (see its
docstring). Run it for an hour by hand: ``python bench/soak.py --duration 3600``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def soak(*args: str, env: dict[str, str] | None = None) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "soak.py"), "--duration", "45", *args],
        capture_output=True, text=True, timeout=600, env={**os.environ, **(env or {})},
    )  # fmt: skip
    summary = "\n".join(
        line
        for line in done.stdout.splitlines()
        if "retrying" not in line and "answers again" not in line
    )
    assert done.returncode == 0, f"{summary}\n{done.stderr[-3000:]}"
    assert "soak: passed" in done.stdout


def test_soak_on_sqlite() -> None:
    soak("--backend", "sqlite")


@pytest.mark.pg
def test_soak_on_two_servers_on_postgresql() -> None:
    if not os.environ.get("TROTH_TEST_PG_URL"):
        pytest.skip("TROTH_TEST_PG_URL is not set (scripts/pg-cluster.sh start)")
    # A cluster of its own: the soak stops and starts its PostgreSQL server once. Not under
    # tmp_path: as root the cluster runs as another user, who cannot enter pytest's folders.
    own = {"TROTH_PG_DIR": f"/tmp/troth-soak-pg-{os.getpid()}", "TROTH_TEST_PG_URL": ""}
    try:
        soak("--backend", "pg", env=own)
    finally:
        subprocess.run(
            ["bash", str(ROOT / "scripts" / "pg-cluster.sh"), "stop"],
            env={**os.environ, **own}, capture_output=True, check=False,
        )  # fmt: skip
