"""A PostgreSQL restart costs no 500s: while the database is down requests are answered
503 (safe to send again, with ``Retry-After``), and once it is back the first requests
succeed. Before, each idle pooled connection failed one request with 500 after a restart.

The test runs its own cluster (``scripts/pg-cluster.sh`` in a folder of its own), since it
stops and starts it."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.support.servers import TrothServer

pytestmark = [pytest.mark.pg, pytest.mark.slow]

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "pg-cluster.sh"


def cluster(command: str, directory: Path) -> str:
    env = {**os.environ, "TROTH_PG_DIR": str(directory)}
    done = subprocess.run(
        ["bash", str(SCRIPT), command], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture
def own_cluster():
    if not os.environ.get("TROTH_TEST_PG_URL") and not shutil.which("pg_ctlcluster"):
        pytest.skip("no PostgreSQL here (TROTH_TEST_PG_URL is not set)")
    directory = Path(f"/tmp/troth-pg-restart-{os.getpid()}")
    try:
        yield directory, cluster("start", directory)
    finally:
        cluster("stop", directory)


def test_a_database_restart_answers_503_then_recovers_without_500(own_cluster, tmp_path):
    directory, url = own_cluster
    server = TrothServer(url, tmp_path / "server.log", ("--pg-pool-size", "8"), {}).start()
    try:
        def create(i: int) -> int:
            data = {"id": f"p{i}", "timeoutAt": 2**40}
            return server.send("promise.create", data).status_code

        # Several requests at once, so the pool holds several connections that go stale.
        with ThreadPoolExecutor(8) as pool:
            assert set(pool.map(create, range(64))) == {200}

        cluster("down", directory)
        during = server.send("promise.create", {"id": "during", "timeoutAt": 2**40})
        assert during.status_code == 503, during.text
        assert during.headers.get("retry-after")

        cluster("start", directory)
        time.sleep(0.5)
        with ThreadPoolExecutor(8) as pool:
            after = list(pool.map(create, range(100, 164)))
        assert after.count(500) == 0 and set(after) == {200}, after
        assert server.http.get("/ready").status_code == 200
    finally:
        server.close()
