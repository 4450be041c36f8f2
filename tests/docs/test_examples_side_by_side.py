"""Examples run side by side against one server without taking each other's tasks (each
has a worker group of its own), and ``troth worker`` finds an app by module path from the
directory it is started in: ``troth worker examples.saga:app`` from the repository root."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.processes import clean_env

from ._support import REPO, user_server

RUNS = {
    ("hello", "ana"): "Hello, ana!",
    ("fan_out", "12"): "12 words, 114 letters",
    ("countdown", "3", "0.2"): "counted down from 3",
    ("saga", "t1"): "booked: ['flight-t1', 'hotel-t1', 'car-t1']",
    ("cancellation", "o1"): "order o1 canceled: the customer changed their mind",
    ("approval", "e1"): "expense e1: paid",
    ("crash_recovery",): "total 30",
}
UNREGISTERED = "no function"  # what a worker logs when given another app's task


def troth_command() -> str:
    """The ``troth`` console script (not ``python -m troth``, which puts the working
    directory on sys.path itself and so would hide a lookup that does not)."""
    found = shutil.which("troth", path=str(Path(sys.executable).parent))
    if found is None:
        pytest.skip("no troth console script next to this Python (not pip-installed)")
    return found


def example(args: tuple[str, ...], cwd: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    command = [sys.executable, str(REPO / "examples" / f"{args[0]}.py"), *args[1:]]
    return subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )


@pytest.mark.slow  # seven examples at once on two cores: about 20 s
def test_examples_side_by_side_on_one_server_take_only_their_own_tasks(tmp_path):
    server = user_server(tmp_path)
    env = clean_env(TROTH_URL=server.url, STEP_SECONDS="0.2")
    worker = subprocess.Popen(
        [troth_command(), "worker", "examples.saga:app"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    runs = {args: example(args, tmp_path, env) for args in RUNS}
    try:
        outputs = {}
        for args, process in runs.items():
            out, _ = process.communicate(timeout=120)
            outputs[args] = out.decode()
            assert process.returncode == 0, f"{args}:\n{outputs[args]}"
            assert RUNS[args] in outputs[args], f"{args}:\n{outputs[args]}"
    finally:
        for process in runs.values():
            process.kill()
        worker.terminate()
        worker_log = worker.communicate(timeout=30)[0].decode()
        server.close()
    for args, out in outputs.items():
        assert UNREGISTERED not in out, f"{args} was given another example's task:\n{out}"
    assert "serving trip for group 'saga'" in worker_log, worker_log
    assert UNREGISTERED not in worker_log, worker_log


@pytest.mark.slow  # troth worker processes
def test_troth_worker_imports_the_app_from_the_directory_it_starts_in(tmp_path):
    (tmp_path / "shop.py").write_text(
        "from troth import Context, Troth\n"
        "app = Troth(group='shop')\n"
        "@app.register\n"
        "async def order(ctx: Context) -> str:\n"
        "    return 'ok'\n"
    )
    env = clean_env(TROTH_DB=str(tmp_path / "troth.db"))
    worker = subprocess.Popen(
        [troth_command(), "worker", "shop:app"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    assert "serving order for group 'shop'" in until_serving(worker)


@pytest.mark.slow  # troth worker processes
def test_troth_worker_serves_the_group_its_help_says_it_reads_from_the_environment(tmp_path):
    """``--group`` says (env TROTH_GROUP): it applies to an app that names its own group."""
    env = clean_env(TROTH_URL="http://127.0.0.1:9", TROTH_GROUP="elsewhere")
    worker = subprocess.Popen(
        [troth_command(), "worker", "examples.hello:app"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    log = until_serving(worker)
    assert "serving hello for group 'elsewhere' (server http://127.0.0.1:9)" in log, log


def until_serving(worker: subprocess.Popen[bytes]) -> str:
    """The worker's log up to the line that says it serves (or up to its exit); stops it."""
    assert worker.stdout is not None
    lines = []
    try:
        for line in iter(worker.stdout.readline, b""):
            lines.append(line.decode())
            if " serving " in lines[-1]:
                break
    finally:
        worker.terminate()
        worker.communicate(timeout=30)
    return "".join(lines)


def test_troth_worker_says_where_it_looked_for_a_module_it_cannot_find():
    done = subprocess.run(
        [troth_command(), "worker", "hello:app"],
        cwd=REPO, env=clean_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip() == f"troth worker: No module named 'hello' (imported from {REPO})"
