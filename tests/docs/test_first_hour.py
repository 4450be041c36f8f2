"""A new user's first hour: in a temporary directory, a clean clone of the repository,
then every shell block of its README in order, as a user types them, without an error or
a hang; afterwards ``git status`` shows nothing the commands left behind.

What the test does that a user does by hand, and nothing more:

- the shell starts without this suite's virtual environment (``python3`` is the
  interpreter the suite runs on, whose venv module builds the README's ``.venv``);
- the README's install command runs as written, downloading into a new ``.venv`` in the
  clone (no reuse of this suite's packages: the point is that the command works);
- a foreground ``troth serve`` ("in another shell") is started in the background and
  waited for; servers of a section are stopped before the next section starts its own, as
  a user presses Ctrl-C;
- ports 8001/8002 become free ports, since other tests may hold them;
- the PostgreSQL block runs on a fresh database of ``TROTH_TEST_PG_URL`` when one is set
  and is skipped otherwise; ``python -m pytest`` (this very suite) is not run again.

Each block runs in a bash of its own with ``set -e``, carrying the environment (the
activated venv, ``export``) from block to block; HTTP answers must carry no 4xx/5xx status.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.ports import free_port
from tests.support.processes import clean_env
from tests.support.servers import wait_ready

from ._support import REPO, Block, blocks

pytestmark = pytest.mark.slow

SERVE = re.compile(r"^troth serve(?P<flags>[^&#\n]*?)\s*(#.*)?$", re.MULTILINE)


def user_env() -> dict[str, str]:
    """A fresh login shell's environment: no venv active, ``python3`` on the PATH."""
    env = clean_env()
    env.pop("VIRTUAL_ENV", None)
    ours = str(Path(sys.executable).parent)
    path = [p for p in env["PATH"].split(os.pathsep) if p != ours]
    base = str(Path(getattr(sys, "_base_executable", sys.executable)).parent)
    env["PATH"] = os.pathsep.join([base, *path])
    return env


class Session:
    def __init__(self, clone: Path, ports: dict[str, str]) -> None:
        self.clone = clone
        self.env = user_env()
        self.ports = ports
        self.servers: list[subprocess.Popen[bytes]] = []
        self.transcript: list[str] = []

    def localize(self, code: str) -> str:
        for port, free in self.ports.items():
            code = code.replace(port, free)
        return code

    def serve(self, flags: str) -> None:
        """``troth serve`` typed in a shell of its own, running until the section ends."""
        port = self.ports["8001"]
        log = self.clone.parent / f"serve-{len(self.servers)}.log"
        command = f"exec troth serve{flags} --port {port}"
        with log.open("wb") as out:
            process = subprocess.Popen(
                ["bash", "-c", command], cwd=self.clone, env=self.env, stdout=out, stderr=out
            )
        self.servers.append(process)
        wait_ready(f"http://127.0.0.1:{port}", process, log, seconds=60)

    def stop_servers(self) -> None:
        for process in self.servers:
            process.send_signal(signal.SIGINT)  # Ctrl-C
            process.wait(30)
        self.servers.clear()

    def run(self, block: Block) -> None:
        code = self.localize(block.code)
        if SERVE.fullmatch(code.strip()):
            self.stop_servers()
            self.serve(self.localize(SERVE.fullmatch(code.strip())["flags"]))
            return
        if "troth serve" in code:
            self.stop_servers()  # this section starts servers of its own
        env_file = self.clone.parent / "env"
        script = f"set -e\n{code}\nenv -0 > {env_file}\n"
        # Output to a file, not a pipe: what the block starts with & keeps its output open.
        log = self.clone.parent / f"block-{block.line}.log"
        with log.open("wb") as out_file:
            process = subprocess.Popen(
                ["bash", "-c", script], cwd=self.clone, env=self.env, start_new_session=True,
                stdout=out_file, stderr=out_file,
            )  # fmt: skip
        try:
            process.wait(timeout=600)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{block.name} hung:\n{code}\n{log.read_text()}")
        finally:
            with contextlib.suppress(ProcessLookupError):  # what it left in the background
                os.killpg(process.pid, signal.SIGKILL)
        out = log.read_text()
        self.transcript.append(f"$ {code}\n{out}")
        assert process.returncode == 0, f"{block.name} failed:\n{code}\n{out}"
        assert not re.search(r'"status":\s*[45]\d\d', out), f"{block.name}:\n{out}"
        assert "Traceback" not in out, f"{block.name}:\n{out}"
        entries = env_file.read_bytes().split(b"\0")
        self.env = dict(e.decode().split("=", 1) for e in entries if b"=" in e)


@pytest.mark.timeout(1800)
def test_a_clean_clone_and_the_readme_commands_in_order_work(tmp_path):
    clone = tmp_path / "troth"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True, timeout=120)
    session = Session(clone, {"8001": str(free_port()), "8002": str(free_port())})
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(session.stop_servers)
        for block in blocks(clone / "README.md", "sh"):
            if block.code.strip() == "python -m pytest":
                continue  # this suite
            if "postgresql://" in block.code:
                pg = os.environ.get("TROTH_TEST_PG_URL")
                if not pg:
                    continue
                from tests.support.postgres import fresh_database

                url = cleanup.enter_context(fresh_database(pg, "first_hour"))
                code = re.sub(r"postgresql://\S+", url, block.code)
                block = Block(block.path, block.line, block.language, code)
            session.run(block)
    transcript = "\n".join(session.transcript)
    assert any("pip install" in t for t in session.transcript)  # the install ran
    assert "total 30" in transcript  # the crash-recovery quickstart finished
    assert '"state":"resolved"' in transcript.replace(" ", "")  # the curl quickstart
    assert "20 words" in transcript  # the worker section's run
    if os.environ.get("TROTH_TEST_PG_URL"):
        assert "50 words" in transcript  # the scale-out section, on two servers
    leftovers = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=clone, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert leftovers == "", f"the README's commands left files git does not ignore:\n{leftovers}"
