"""docs/cli.md's shell blocks run as shown, in order, against a real ``troth serve`` and a
``troth worker examples.hello:app`` that this test starts in place of the walkthrough's
first block (``troth dev &``, the worker, ``export TROTH_URL``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs._support import REPO, blocks
from tests.support.processes import clean_env, worker
from tests.support.servers import serve

pytestmark = pytest.mark.slow  # a server and a worker process

PAGE = REPO / "docs" / "cli.md"


def test_every_shell_block_of_the_cli_guide_runs(tmp_path: Path):
    first, *rest = blocks(PAGE, "sh")
    assert "troth dev &" in first.code and len(rest) >= 5
    with serve("sqlite", tmp_path, debug=False) as server:
        bin = str(Path(sys.executable).parent)  # where pip put the troth command
        env = clean_env(TROTH_URL=server.url)
        env["PATH"] = f"{bin}:{env['PATH']}"
        process = worker(REPO, env, "examples.hello:app", log=tmp_path / "worker.log")
        try:
            for block in rest:
                done = subprocess.run(
                    ["bash", "-e", "-c", block.code], cwd=REPO, env=env,
                    capture_output=True, text=True, timeout=120, check=False,
                )  # fmt: skip
                assert done.returncode == 0, f"{block.name}:\n{done.stdout}\n{done.stderr}"
                if "--wait" in block.code:
                    assert "Hello, " in done.stdout, done.stdout
        finally:
            process.terminate()
            process.wait(30)
