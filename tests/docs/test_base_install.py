"""``pip install troth`` without extras (an SDK-only user): the SDK works, embedded and
against a server, and the ``troth`` command prints its help, runs workers, and answers a
server command with the extra to install instead of a traceback.

The package is installed from a copy of the working tree (``pyproject.toml``, the README,
``src``) into a new virtual environment, exactly as ``pip install`` does it for a user;
pip fetches the base dependencies (and the build backend) from the configured index or its
cache, so this is marked slow.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.processes import clean_env

from ._support import REPO, user_server

pytestmark = pytest.mark.slow
SERVER_EXTRA = "pip install 'troth[server]'"


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bin directory of a venv holding troth's base install and nothing more."""
    root = tmp_path_factory.mktemp("base-install")
    source = root / "troth"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    shutil.copytree(REPO / "src", source / "src", ignore=ignore)
    subprocess.run([sys.executable, "-m", "venv", str(root / "venv")], check=True)
    bin = root / "venv" / "bin"
    done = subprocess.run(
        [bin / "pip", "install", "--quiet", str(source)],
        env=clean_env(), capture_output=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    return bin


def run(
    bin: Path, *command: str, cwd: Path | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(bin / command[0]), *command[1:]],
        cwd=cwd, env=clean_env(**env), capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_the_base_install_has_no_server_packages(base: Path):
    for module in ("uvicorn", "jwt"):
        assert run(base, "python", "-c", f"import {module}").returncode != 0, module


@pytest.mark.parametrize("command", [("--help",), ("worker", "--help"), ("serve", "--help")])
def test_the_troth_command_prints_its_help(base: Path, command: tuple[str, ...]):
    done = run(base, "troth", *command)
    assert done.returncode == 0, done.stderr
    assert "usage: troth" in done.stdout


@pytest.mark.parametrize("command", ["serve", "dev"])
def test_a_server_command_names_the_extra_to_install(base: Path, command: str, tmp_path):
    done = run(base, "troth", command, cwd=tmp_path)
    assert done.returncode == 2
    assert SERVER_EXTRA in done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_the_sdk_runs_embedded(base: Path, tmp_path):
    done = run(base, "python", str(REPO / "examples" / "hello.py"), "ana", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Hello, ana!" in done.stdout


def test_the_sdk_works_against_a_server_and_as_a_troth_worker(base: Path, tmp_path):
    server = user_server(tmp_path)  # from the full install: the base one has no server
    try:
        done = run(base, "python", str(REPO / "examples" / "fan_out.py"), "5", cwd=tmp_path,
                   TROTH_URL=server.url)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "5 words, 30 letters" in done.stdout
        worker = subprocess.Popen(
            [str(base / "troth"), "worker", "examples.hello:app", "--url", server.url],
            cwd=REPO, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            out, _ = worker.communicate(timeout=5)
        except subprocess.TimeoutExpired:  # serving
            worker.terminate()
            out, _ = worker.communicate(timeout=30)
        assert "serving hello for group 'hello'" in out.decode(), out.decode()
    finally:
        server.close()
