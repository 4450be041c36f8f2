"""The server's database and the embedded one are distinct files, named in ``--help`` and
at startup; the help of ``troth serve`` and ``troth dev`` states only environment
variables that command reads; a bad ``--db`` is one clear line and a non-zero exit."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.support.ports import free_port
from tests.support.processes import clean_env
from tests.support.servers import wait_ready
from troth import cli
from troth.cli import server
from troth.sdk.app import DEFAULT_DB


def help_of(command: str, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit):
        cli.main([command, "--help"])
    return " ".join(capsys.readouterr().out.split())  # argparse wraps lines anywhere


def env_read_by(command: str, monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """The TROTH_* variables ``command`` takes a value from, with all of them set."""
    read: list[str] = []

    def from_env(setting, raw):
        read.append(server._env(setting.name))
        return setting.default

    monkeypatch.setattr(server, "_from_env", from_env)
    args = cli._parser().parse_args([command])
    server.config_from(args, {server._env(s.name): "x" for s in server._settings()})
    return set(read)


@pytest.mark.parametrize("command", ["serve", "dev"])
def test_help_names_exactly_the_environment_variables_the_command_reads(
    command, capsys, monkeypatch
):
    named = set(re.findall(r"\(env (TROTH_\w+)\)", help_of(command, capsys)))
    assert named == env_read_by(command, monkeypatch)
    assert ("TROTH_DB" in named) == (command == "serve")  # dev never opens a real database


def test_the_server_default_database_is_not_the_embedded_one(capsys):
    assert "[default: troth-server.db]" in help_of("serve", capsys)
    assert DEFAULT_DB == "troth.db"


@pytest.mark.slow  # a troth serve process
def test_the_startup_line_names_the_default_database(tmp_path):
    port = free_port()
    log = tmp_path / "log"
    with log.open("wb") as out:
        command = [sys.executable, "-m", "troth", "serve", "--port", str(port)]
        server = subprocess.Popen(command, cwd=tmp_path, env=clean_env(), stdout=out, stderr=out)
    try:
        wait_ready(f"http://127.0.0.1:{port}", server, log)
    finally:
        server.terminate()
        server.wait(30)
    assert re.search(r"troth serving at .*db \S*troth-server\.db", log.read_text()), log.read_text()
    assert (tmp_path / "troth-server.db").exists() and not (tmp_path / "troth.db").exists()


@pytest.mark.slow  # a troth serve process that fails at startup
@pytest.mark.parametrize("db", ["missing/dir/x.db", "."])
def test_a_bad_db_path_is_one_line_naming_it(tmp_path, db):
    done = subprocess.run(
        [sys.executable, "-m", "troth", "serve", "--port", str(free_port()), "--db", db],
        cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode != 0
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in lines[0], lines
    assert db in lines[0] or str(tmp_path / db) in lines[0], lines
