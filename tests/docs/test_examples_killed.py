"""Each example survives ``kill -9`` at any moment: killed after a random delay and run
again with the same command, it finishes with the right output, and no step that had
finished runs again (only the one cut off by the kill may).

The evidence is each example's own output: every step prints one line, indented, when it
runs, so a line printed twice across the two runs is a step run twice; crash_recovery
keeps a ledger file as well. The delay is in every failure message, to replay a failure.
"""

from __future__ import annotations

import contextlib
import random
import re
import shlex
import sqlite3
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.processes import clean_env
from tests.support.servers import TrothServer

from ._support import REPO, user_server

# Slow: each test runs an example in processes and kills it.
pytestmark = pytest.mark.slow

EXAMPLES = REPO / "examples"


@dataclass(frozen=True)
class Case:
    example: str
    args: tuple[str, ...]
    done: str  # in the output of the run that finishes
    steps: str  # a line that a step prints (main's own lines may repeat on a rerun)
    seconds: float  # about how long a run takes: the kill comes within it


BOOKINGS = r"  (booked|cancelled)"
CASES = [
    Case("hello", ("ana",), "Hello, ana!", r"  \(running the step", 1.5),
    Case("fan_out", ("20",), "20 words, 270 letters", r"$^", 2.5),
    Case("saga", ("t1",), "booked: ['flight-t1', 'hotel-t1', 'car-t1']", BOOKINGS, 2),
    Case("saga", ("t2", "--fail-car"), "trip t2 rolled back", BOOKINGS, 2),
    Case("cancellation", ("o1",), "order o1 canceled: the customer changed", r"  \w+ ", 2.5),
    Case("cancellation", ("o2", "--timeout"), "order o2 canceled: ", r"  \w+ ", 5),
    Case("approval", ("e1",), "expense e1: paid", r"  approval", 2.5),
    Case("approval", ("e2", "--reject"), "expense e2: refused: over budget", r"  approval", 2.5),
    Case("countdown", ("3", "0.3"), "counted down from 3", r"  (\d\.\.\.|liftoff)", 2.5),
]


def start(example: str, *args: str, cwd: Path, **env: str) -> subprocess.Popen[bytes]:
    command = [sys.executable, str(EXAMPLES / f"{example}.py"), *args]
    return subprocess.Popen(
        command, cwd=cwd, env=clean_env(**env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )


def kill_after(process: subprocess.Popen[bytes], delay: float) -> tuple[str, bool]:
    """The output of ``process``, SIGKILLed after ``delay`` s unless it finished first."""
    try:
        out, _ = process.communicate(timeout=delay)
        return out.decode(), False
    except subprocess.TimeoutExpired:
        process.kill()
        out, _ = process.communicate()
        return out.decode(), True


def rerun(example: str, *args: str, cwd: Path, why: str, **env: str) -> str:
    process = start(example, *args, cwd=cwd, **env)
    try:
        out, _ = process.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        process.kill()
        out, _ = process.communicate()
        pytest.fail(f"the rerun hung ({why}):\n{out.decode()}")
    assert process.returncode == 0, f"the rerun failed ({why}):\n{out.decode()}"
    return out.decode()


def case_id(case: Case) -> str:
    return " ".join((case.example, *case.args))


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_an_example_killed_at_a_random_moment_finishes_when_run_again(case: Case, tmp_path):
    killed_and_run_again(case, tmp_path, {})


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TrothServer]:
    server = user_server(tmp_path_factory.mktemp("server"))
    yield server
    server.close()


@pytest.mark.parametrize(
    "case", [c for c in CASES if c.example in ("countdown", "saga")], ids=case_id
)
def test_an_example_killed_against_a_server_finishes_when_run_again(case: Case, tmp_path, server):
    # Fresh ids: every test of this module shares the server.
    args = (f"{case.args[0]}{uuid.uuid4().hex[:6]}", *case.args[1:])
    if case.example == "countdown":  # its id is made of its arguments: change the pause
        args = (case.args[0], f"0.{random.randint(300, 399)}")
    done = case.done.replace(case.args[0], args[0]) if case.example == "saga" else case.done
    killed_and_run_again(Case(case.example, args, done, case.steps, case.seconds), tmp_path,
                         {"TROTH_URL": server.url})  # fmt: skip


def killed_and_run_again(case: Case, tmp_path: Path, env: dict[str, str]) -> None:
    delay = random.uniform(0.1, case.seconds)
    first, killed = kill_after(start(case.example, *case.args, cwd=tmp_path, **env), delay)
    why = f"killed after {delay:.2f} s" if killed else f"finished within {delay:.2f} s"
    second = rerun(case.example, *case.args, cwd=tmp_path, why=why, **env)
    assert case.done in second, f"{why}:\n{first}\n--- run again:\n{second}"

    def steps(out: str) -> list[str]:
        return [line for line in out.splitlines() if re.match(case.steps, line)]

    ran = Counter(steps(first) + steps(second))
    twice = {line for line, n in ran.items() if n > 1}
    cut_off = steps(first)[-1:] if killed else []  # the step running when the kill came
    assert twice <= set(cut_off), f"steps ran again ({why}): {twice}\n{first}\n---\n{second}"
    assert all(n <= 2 for n in ran.values()), ran


def test_crash_recovery_killed_at_a_random_moment_runs_each_finished_step_once(tmp_path):
    ledger = tmp_path / "crash_recovery.ledger"
    env = {"STEP_SECONDS": "0.3"}
    delay = random.uniform(0.1, 2.5)
    _, killed = kill_after(start("crash_recovery", cwd=tmp_path, **env), delay)
    why = f"killed after {delay:.2f} s" if killed else f"finished within {delay:.2f} s"
    recorded = recorded_steps(tmp_path / "troth.db")
    second = rerun("crash_recovery", cwd=tmp_path, why=why, **env)
    assert "total 30" in second
    ran = Counter(ledger.read_text().splitlines())
    # A step recorded before the kill never runs again. The one the kill cut off may have
    # run to its end ("done") and still run again: its result was not recorded yet.
    assert all(ran[f"start {n}"] == ran[f"done {n}"] == 1 for n in recorded), (why, ran)
    assert all(1 <= ran[f"done {n}"] <= 2 for n in range(5)), (why, ran)
    assert sum(ran[f"start {n}"] for n in range(5)) <= 6, (why, ran)  # one cut off, at most


def recorded_steps(db: Path) -> list[int]:
    """The steps of crash_recovery's ``pipeline-1`` whose results the file holds."""
    if not db.exists():
        return []
    with contextlib.closing(sqlite3.connect(db)) as connection:
        rows = connection.execute(
            "SELECT id FROM promises WHERE id LIKE 'pipeline-1:%' AND state = 'resolved'"
        ).fetchall()
    return [int(id.split(":")[1]) for (id,) in rows if id.split(":")[1].isdigit()]


@pytest.mark.parametrize("mode", ["embedded", "remote"])
def test_approval_by_hand_survives_a_kill_and_the_printed_command_approves(mode, tmp_path):
    """The approver is a person: the example prints the command that approves, the person
    runs it from another shell (another directory here) while the example is dead, and the
    example, run again, finishes at once."""
    server = user_server(tmp_path) if mode == "remote" else None
    try:
        approve_by_hand(tmp_path, {"TROTH_URL": server.url} if server else {})
    finally:
        if server is not None:
            server.close()


def approve_by_hand(tmp_path: Path, env: dict[str, str]) -> None:
    process = start("approval", "e9", "--by-hand", cwd=tmp_path, **env)
    assert process.stdout is not None
    lines = [process.stdout.readline().decode() for _ in range(2)]
    assert lines[0].startswith("to approve from another shell"), lines
    command = lines[1].strip()
    out, killed = kill_after(process, random.uniform(0.1, 1.5))
    assert killed and "expense e9" not in out  # nobody approved: it was waiting
    elsewhere = tmp_path / "another-shell"
    elsewhere.mkdir()
    path = f"{Path(sys.executable).parent}:{clean_env()['PATH']}"  # `python` is this one
    approve = subprocess.run(
        ["bash", "-c", command], cwd=elsewhere, env=clean_env(PATH=path), capture_output=True
    )
    assert approve.returncode == 0, f"{command}\n{approve.stderr.decode()}"
    assert not (elsewhere / "troth.db").exists()  # it approved in the example's database
    second = rerun("approval", "e9", "--by-hand", cwd=tmp_path, why="approved while dead", **env)
    assert "expense e9: paid" in second
    assert "approval requested" not in second  # that step had finished: not asked twice
    where = shlex.split(command)[0]
    assert where == f"TROTH_URL={env['TROTH_URL']}" if env else where.startswith("TROTH_DB=")
