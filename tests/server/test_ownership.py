"""One owner per SQLite file: a second ``troth serve`` on a file a server already serves,
an embedded app on a served file, or a server on a file embedded apps use, is refused at
start with a message that says who holds the file. Before, two servers started without a
word and both ran timeouts and delivery on the same outbox."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.ports import free_port
from tests.support.servers import TrothServer
from troth import ServerError, Troth

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # slow: troth serve processes per test


def serve(db: Path) -> subprocess.CompletedProcess[str]:
    """``troth serve`` on ``db`` that is expected to refuse and exit."""
    return subprocess.run(
        [sys.executable, "-m", "troth", "serve", "--host", "127.0.0.1",
         "--port", str(free_port()), "--db", str(db)],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip


async def test_a_second_server_on_a_served_file_is_refused(tmp_path):
    db = tmp_path / "owned.db"
    first = TrothServer(db, tmp_path / "first.log", (), {}).start()
    try:
        second = serve(db)
        assert second.returncode == 1
        assert f"{db} is served by troth serve (pid {first.process.pid})" in second.stderr
        assert second.stderr.count("\n") <= 2  # one clear line, no traceback
        assert first.http.get("/ready").status_code == 200  # the owner is untouched

        embedded = Troth(db=str(db))
        with pytest.raises(ServerError, match="served by troth serve"):
            await embedded.start()
    finally:
        first.close()
    # Once the owner has gone, the file is free again.
    again = TrothServer(db, tmp_path / "again.log", (), {}).start()
    again.close()


async def test_a_server_on_a_file_embedded_apps_use_is_refused(tmp_path):
    db = tmp_path / "embedded.db"
    app = Troth(db=str(db))
    async with app:
        refused = serve(db)
        assert refused.returncode == 1
        assert "in use by embedded troth apps" in refused.stderr
        # Embedded apps share the file with each other.
        async with Troth(db=str(db)) as other:
            assert other.started


def test_a_database_that_cannot_be_opened_is_one_clear_line(tmp_path):
    refused = serve(tmp_path / "missing" / "troth.db")
    assert refused.returncode == 1
    assert f"cannot open the database {tmp_path / 'missing' / 'troth.db'}" in refused.stderr
    assert "Traceback" not in refused.stderr
