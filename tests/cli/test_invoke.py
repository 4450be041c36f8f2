"""``troth invoke`` against real ``troth worker`` processes, on a server (SQLite and
PostgreSQL) and on an embedded database file: the function runs with the arguments given
as JSON, ``--wait`` prints its result decoded, and its failure is exit 1. A few commands
run as the installed ``troth`` executable, the way a script runs them."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.processes import worker
from tests.support.waiting import eventually

pytestmark = pytest.mark.slow  # a worker process per module and place

APP = """
from troth import Context, Troth

app = Troth()

@app.register
async def add(ctx: Context, a: int, b: int) -> int:
    return await ctx.run(lambda: a + b)

@app.register
async def fail(ctx: Context, why: str) -> None:
    raise ValueError(why)
"""

TROTH = Path(sys.executable).parent / "troth"  # the console script pip installed


@pytest.fixture(scope="module")
def workers(place, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    folder = tmp_path_factory.mktemp("app")
    (folder / "calc.py").write_text(textwrap.dedent(APP))
    env = {"TROTH_URL": "", "TROTH_DB": "", "TROTH_GROUP": "calc"}
    env["TROTH_URL" if place.server else "TROTH_DB"] = place.flags[1]
    process = worker(folder, env, "calc:app", log=folder / "worker.log")
    yield
    process.terminate()
    process.wait(30)


def test_wait_prints_the_result_decoded(troth, place, workers):
    ran = troth("invoke", "add", "--id", "sum-1", "--arg", "2", "--arg", "3", "--target",
                "calc", "--wait", "--json", *place.flags)  # fmt: skip
    assert ran.code == 0, ran.err
    assert (ran.json["state"], ran.json["value"]["data"]) == ("resolved", 5)
    assert ran.json["param"]["data"] == {"func": "add", "args": [2, 3]}
    table = troth("invoke", "add", "--id", "sum-1", "--arg", "2", "--arg", "3", "--target",
                  "calc", "--wait", *place.flags)  # fmt: skip
    assert table.code == 0 and "resolved" in table.out  # joined: the same work


def test_without_wait_it_starts_the_execution_and_returns(troth, place, workers):
    ran = troth("invoke", "add", "--id", "sum-2", "--arg", "40", "--arg", "2",
                "--target", "calc", *place.flags)  # fmt: skip
    assert ran.code == 0 and "started 'sum-2'" in ran.out

    def settled() -> dict | None:
        got = troth("promises", "get", "sum-2", "--json", *place.flags).json
        return got if got["state"] != "pending" else None

    got = eventually(settled, timeout=30)
    assert (got["state"], got["value"]["data"]) == ("resolved", 42)


def test_a_failed_execution_is_exit_1_with_its_error(troth, place, workers):
    ran = troth("invoke", "fail", "--id", "bad-1", "--arg", '"out of stock"', "--target",
                "calc", "--wait", *place.flags)  # fmt: skip
    assert ran.code == 1
    assert ran.err == "troth: execution 'bad-1' rejected\n"
    assert "ValueError: out of stock" in ran.out


def test_the_same_id_with_other_work_is_a_conflict(troth, place, workers):
    troth("invoke", "add", "--id", "sum-3", "--arg", "1", "--arg", "1", "--target", "calc",
          *place.flags)  # fmt: skip
    ran = troth("invoke", "add", "--id", "sum-3", "--arg", "9", "--arg", "9", "--target",
                "calc", *place.flags)  # fmt: skip
    assert ran.code == 6
    assert "sum-3" in ran.err and len(ran.err.splitlines()) == 1


def test_the_installed_command_answers_scripts_by_exit_code(place, workers):
    def troth(*argv: str) -> subprocess.CompletedProcess[str]:
        command = [str(TROTH), *argv, *place.flags]
        return subprocess.run(command, check=False, capture_output=True, text=True, timeout=60)

    done = troth("invoke", "add", "--id", "sum-4", "--arg", "1", "--arg", "2",
                 "--target", "calc", "--wait")  # fmt: skip
    assert done.returncode == 0 and "3" in done.stdout, done.stderr
    failed = troth("invoke", "fail", "--id", "bad-2", "--arg", '"x"', "--target", "calc", "--wait")
    assert failed.returncode == 1
    missing = troth("tasks", "get", "no-such-task")
    assert (missing.returncode, missing.stderr) == (5, "troth: task 'no-such-task': not found\n")
    bad = troth("promises", "create", "p", "--param", "{")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr
