"""A server or worker that cannot start says why in one line on stderr and exits non-zero:
a port in use (naming it), a database path it cannot open (naming the path and the
cause), an unreachable PostgreSQL (naming host and port, never the password).

Before, a taken port was six lines of uvicorn's log after a startup that looked fine, an
unreachable PostgreSQL a 27-line traceback, and a missing directory named the
``<db>.owner`` file the user never gave.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.ports import free_port

pytestmark = pytest.mark.slow  # a troth process per case

PASSWORD = "hunter2-secret"


def troth(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "troth", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
    )


def one_line(ran: subprocess.CompletedProcess[str]) -> str:
    """The failure's one line of stderr, having checked the exit status."""
    assert ran.returncode == 1, ran.stderr
    lines = ran.stderr.splitlines()
    assert len(lines) == 1, ran.stderr
    assert "Traceback" not in lines[0]
    return lines[0]


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


@pytest.mark.parametrize("command", ["serve", "dev"])
def test_a_port_in_use_is_one_line_naming_it(command: str, taken_port: int, tmp_path: Path) -> None:
    db = str(tmp_path / "t.db")
    line = one_line(troth(command, "--host", "127.0.0.1", "--port", str(taken_port), "--db", db))
    assert f"cannot listen on 127.0.0.1:{taken_port}: port {taken_port} is already in use" in line
    assert not Path(db).exists()  # found before the database was opened


def test_an_address_not_on_this_machine_is_one_line(tmp_path: Path) -> None:
    line = one_line(troth("serve", "--host", "192.0.2.1", "--db", str(tmp_path / "t.db")))
    assert "cannot listen on 192.0.2.1:8001: no such address on this machine" in line


def missing(tmp_path: Path) -> Path:
    return tmp_path / "missing" / "t.db"


def not_a_database(tmp_path: Path) -> Path:
    path = tmp_path / "notes.db"
    path.write_text("these are my notes, not a database\n" * 100)
    return path


def a_directory(tmp_path: Path) -> Path:
    (tmp_path / "data").mkdir()
    return tmp_path / "data"


def under_a_file(tmp_path: Path) -> Path:
    (tmp_path / "file").write_text("")
    return tmp_path / "file" / "t.db"


CASES = {
    "missing directory": (missing, "its directory {tmp}/missing does not exist"),
    "a directory": (a_directory, "it is a directory, not a database file"),
    "not a database": (not_a_database, "the file is not a SQLite database"),
    "under a file": (under_a_file, "{tmp}/file is not a directory"),
}  # fmt: skip


@pytest.mark.parametrize("case", CASES)
def test_a_database_path_that_cannot_be_opened_is_one_line_naming_it(
    case: str, tmp_path: Path
) -> None:
    make, why = CASES[case]
    path = make(tmp_path)
    line = one_line(troth("serve", "--port", str(free_port()), "--db", str(path)))
    assert f"troth serve: cannot open the database {path}: {why.format(tmp=tmp_path)}" in line


@pytest.mark.skipif(not os.path.isdir("/sys/kernel"), reason="needs sysfs (no files created)")
def test_a_database_in_a_directory_nobody_may_write_is_one_line_naming_it() -> None:
    # sysfs refuses new files even to root; a chmod-ed directory would not stop root.
    line = one_line(troth("serve", "--port", str(free_port()), "--db", "/sys/kernel/t.db"))
    assert "cannot open the database /sys/kernel/t.db: Permission denied: troth must read" in line


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write whatever the mode says")
def test_a_database_this_user_may_not_write_is_one_line_naming_it(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    line = one_line(troth("serve", "--port", str(free_port()), "--db", str(locked / "t.db")))
    assert f"cannot open the database {locked / 't.db'}: Permission denied" in line


def test_an_unreachable_postgresql_is_one_line_naming_host_and_port_not_the_password() -> None:
    port = free_port()  # nothing listens there
    url = f"postgresql://troth:{PASSWORD}@127.0.0.1:{port}/troth"
    line = one_line(troth("serve", "--port", str(free_port()), "--db", url))
    assert "troth serve: cannot open the database" in line
    assert f'"127.0.0.1", port {port} failed: Connection refused' in line
    assert PASSWORD not in line


def test_a_postgresql_that_never_answers_is_one_line_after_the_connect_timeout(
    taken_port: int,
) -> None:
    # The port listens and never answers, as behind a firewall that drops packets: without a
    # connect timeout the server would wait for ever, saying nothing.
    url = f"postgresql://troth:{PASSWORD}@127.0.0.1:{taken_port}/troth"
    began = time.monotonic()
    line = one_line(troth("serve", "--port", str(free_port()), "--db", url))
    assert time.monotonic() - began < 40  # 10 s of connect timeout, and the startup
    assert f"host=127.0.0.1 port={taken_port}: connection timeout expired" in line
    assert PASSWORD not in line


def test_in_the_json_format_the_failure_is_one_json_line(taken_port: int, tmp_path: Path) -> None:
    ran = troth(
        "serve", "--log-format", "json", "--port", str(taken_port), "--db", str(tmp_path / "t.db")
    )
    record = json.loads(one_line(ran))
    assert (record["level"], record["logger"]) == ("ERROR", "troth.server.serve")
    assert f"port {taken_port} is already in use" in record["message"]


def test_a_worker_whose_embedded_database_cannot_be_opened_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "shop.py").write_text(
        f"from troth import Troth\napp = Troth(db={str(tmp_path / 'missing' / 't.db')!r})\n"
    )
    line = one_line(troth("worker", "shop:app", cwd=tmp_path))
    assert line == (
        f"troth worker: cannot open the database {str(tmp_path / 'missing' / 't.db')!r}:"
        f" its directory {tmp_path / 'missing'} does not exist"
    )
