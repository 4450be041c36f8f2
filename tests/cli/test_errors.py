"""What goes wrong is one line on stderr, no traceback, and an exit code a script can rely
on (docs/cli.md): unreachable, refused, no target, a bad flag."""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

import pytest

from tests.support.ports import free_port
from tests.support.servers import serve
from troth.cli.errors import Exit


def one_line(ran) -> str:
    assert len(ran.err.splitlines()) == 1, ran.err
    assert "Traceback" not in ran.err
    return ran.err


def test_version_is_the_installed_package_version(troth):
    ran = troth("--version")
    assert (ran.code, ran.out) == (0, f"troth {importlib.metadata.version('troth')}\n")


@pytest.mark.slow  # the request is retried for five seconds first
def test_an_unreachable_server_is_exit_3(troth):
    url = f"http://127.0.0.1:{free_port()}"
    ran = troth("promises", "get", "x", "--url", url)
    assert ran.code == 3
    assert f"cannot reach the server {url}" in one_line(ran)


def test_a_missing_database_file_is_exit_3_and_is_not_created(troth, tmp_path):
    missing = tmp_path / "nowhere.db"
    ran = troth("tasks", "search", "--db", str(missing))
    assert ran.code == 3 and str(missing) in one_line(ran)
    assert not missing.exists()


def test_no_target_is_a_usage_error_naming_the_options(troth):
    ran = troth("promises", "search")
    assert ran.code == 2 and "--url" in one_line(ran) and "--db" in ran.err


def test_url_and_db_together_is_a_usage_error(troth, tmp_path):
    ran = troth("promises", "search", "--url", "http://127.0.0.1:1", "--db", str(tmp_path))
    assert ran.code == 2 and "not both" in one_line(ran)


def test_the_environment_names_the_target(troth, place, monkeypatch):
    troth("promises", "create", "from-env", *place.flags)
    name = "TROTH_URL" if place.server else "TROTH_DB"
    monkeypatch.setenv(name, place.flags[1])
    ran = troth("promises", "get", "from-env", "--json")
    assert ran.code == 0 and ran.json["id"] == "from-env"


@pytest.mark.parametrize(
    "argv",
    [
        ["promises", "frobnicate"],
        ["promises", "search", "--state", "done", "--db", "x"],
        ["tasks", "search", "--limit", "many", "--db", "x"],
        ["invoke", "f", "--db", "x"],  # no --id
        ["schedules", "create", "s", "--cron", "* * * * *", "--db", "x"],  # no --func
    ],
)
def test_a_bad_flag_is_exit_2_in_one_line(troth, argv):
    ran = troth(*argv)
    assert ran.code == 2
    assert one_line(ran).startswith("troth ")


@pytest.mark.slow  # a troth serve process
def test_auth_refused_is_exit_4_and_a_good_token_works(troth, tmp_path):
    with serve("sqlite", tmp_path, "--auth-token", "s3cret", debug=False) as server:
        flags = ["--url", server.url]
        missing = troth("promises", "create", "guarded", *flags)
        assert missing.code == 4 and "401" in one_line(missing)
        wrong = troth("promises", "create", "guarded", "--token", "wrong", *flags)
        assert wrong.code == 4 and one_line(wrong)
        made = troth("promises", "create", "guarded", "--token", "s3cret", "--json", *flags)
        assert (made.code, made.json["id"]) == (0, "guarded")


def test_the_documented_exit_codes_are_the_commands_own():
    page = (Path(__file__).parents[2] / "docs" / "cli.md").read_text()
    documented = [int(code) for code in re.findall(r"^\| (\d+) \| ", page, re.MULTILINE)]
    assert documented == [int(code) for code in Exit]


@pytest.mark.slow  # starts a server
def test_a_url_without_a_scheme_means_http(troth, tmp_path):
    with serve("sqlite", tmp_path) as server:
        bare = server.url.removeprefix("http://")
        ran = troth("promises", "get", "nope", "--url", bare)
    assert ran.code == Exit.NOT_FOUND, ran.err  # reached: the server answered 404
    assert "Traceback" not in ran.err and "cannot reach" not in ran.err


@pytest.mark.parametrize("command", [("promises", "get", "x"), ("worker", "examples.hello:app")])
def test_a_url_of_another_scheme_is_a_usage_error_in_one_line(troth, command):
    ran = troth(*command, "--url", "ftp://127.0.0.1:1")
    assert ran.code == 2
    assert "ftp://127.0.0.1:1" in one_line(ran) and "http://" in ran.err
