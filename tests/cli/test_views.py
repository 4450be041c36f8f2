"""``troth tree`` and ``troth executions list|cancel|resume`` against real ``troth worker``
processes of the shop app, on a server (SQLite and PostgreSQL) and on an embedded
database file: the tree with a retried step's attempts and error, drawn by rich; the list
with its filters and pages; cancel through troth's cancellation, resume of a halted
execution; and the error paths (unknown ids, bad flags, an unreachable server)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.shop import GROUP, shop_worker
from tests.support.waiting import eventually

pytestmark = pytest.mark.slow  # a worker process per place


@pytest.fixture(autouse=True)
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """rich wraps at 80 columns off a terminal; the assertions read whole lines."""
    monkeypatch.setenv("COLUMNS", "200")


@pytest.fixture(scope="module")
def shop(place: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    folder = tmp_path_factory.mktemp("shop")
    where = {"url": place.server.url} if place.server else {"db": str(place.db)}
    process = shop_worker(folder, **where)
    yield
    process.terminate()
    process.wait(30)


def invoke(troth: Any, place: Any, id: str, fn: str, *args: str) -> None:
    argv = ["invoke", fn, "--id", id, "--target", GROUP, *place.flags]
    for arg in args:
        argv += ["--arg", arg]
    ran = troth(*argv)
    assert ran.code == 0, ran.err


def test_tree_draws_a_retried_step_and_its_rpc_child(troth, place, shop) -> None:
    invoke(troth, place, "cart-1", "checkout", "1")

    def retried() -> dict[str, Any] | None:
        tree = troth("tree", "cart-1", "--json", *place.flags).json
        runs = [c for c in tree["children"] if c["kind"] == "run"]
        return tree if runs and runs[0]["attempts"] >= 3 else None

    tree = eventually(retried, timeout=30)
    assert (tree["function"], tree["state"]) == ("checkout", "pending")
    drawn = troth("tree", "cart-1", *place.flags)
    assert drawn.code == 0, drawn.err
    lines = drawn.out.splitlines()
    assert lines[0].startswith("root checkout  cart-1  pending")
    # rich's guides draw the children under the root, the attempts under their step.
    assert any("├── " in line or "└── " in line for line in lines)
    assert any("rpc reserve  cart-1:" in line and "resolved" in line for line in lines)
    step = next(n for n, line in enumerate(lines) if "run charge_card" in line)
    assert "attempt " in lines[step + 1] and "started " in lines[step + 1]
    assert "error: ConnectionError: card service down for order 1" in drawn.out
    assert sum("attempt  cart-1:" in line for line in lines) >= 2


def test_watch_follows_until_the_execution_settles(troth, place, shop) -> None:
    invoke(troth, place, "nap-w", "nap", "1")
    watched = troth("tree", "nap-w", "--watch", "--interval", "0.2", *place.flags)
    assert watched.code == 0, watched.err
    # Off a terminal rich prints the last frame only: the one drawn once it settled.
    assert "root nap  nap-w  resolved" in watched.out
    assert "sleep  nap-w:" in watched.out
    assert troth("tree", "nap-w", "--json", *place.flags).json["state"] == "resolved"


def test_list_filters_and_pages(troth, place, shop) -> None:
    for n in range(3):
        invoke(troth, place, f"sum-{n}", "add", str(n), "1")

    def done() -> list[dict[str, Any]] | None:
        ran = troth("executions", "list", "--function", "add", "--state", "resolved", "--json",
                    *place.flags)  # fmt: skip
        rows = ran.json["executions"]
        return rows if len(rows) == 3 else None

    rows = eventually(done, timeout=30)
    assert sorted(r["id"] for r in rows) == ["sum-0", "sum-1", "sum-2"]
    first = troth("executions", "list", "--function", "add", "--limit", "2", "--json", *place.flags)
    assert len(first.json["executions"]) == 2 and first.json["next"]
    rest = troth("executions", "list", "--function", "add", "--limit", "2", "--cursor",
                 first.json["next"], "--json", *place.flags)  # fmt: skip
    ids = [r["id"] for r in first.json["executions"] + rest.json["executions"]]
    assert sorted(ids) == ["sum-0", "sum-1", "sum-2"] and rest.json["next"] is None

    table = troth("executions", "list", "--function", "add", "--since", "1h", *place.flags)
    assert table.code == 0 and "sum-2" in table.out and "resolved" in table.out
    assert "sum-" not in troth("executions", "list", "--until", "1h", *place.flags).out
    since_2000 = troth("executions", "list", "--function", "add", "--since",
                       "2000-01-01T00:00:00Z", "--json", *place.flags)  # fmt: skip
    assert len(since_2000.json["executions"]) == 3

    tagged = ["invoke", "add", "--id", "sum-blue", "--arg", "1", "--arg", "1", "--target",
              GROUP, "--tag", "team=blue", *place.flags]  # fmt: skip
    assert troth(*tagged).code == 0
    blue = troth("executions", "list", "--tag", "team=blue", "--json", *place.flags).json
    assert [r["id"] for r in blue["executions"]] == ["sum-blue"]


def test_cancel_uses_troths_cancellation(troth, place, shop) -> None:
    invoke(troth, place, "nap-c", "nap", "600")
    eventually(lambda: any(c["kind"] == "sleep" for c in troth(
        "tree", "nap-c", "--json", *place.flags).json["children"]), timeout=30)  # fmt: skip
    ran = troth("executions", "cancel", "nap-c", "--reason", "closing time", *place.flags)
    assert ran.code == 0, ran.err
    assert "asked execution 'nap-c' to stop" in ran.out

    def ended() -> dict[str, Any] | None:
        tree = troth("tree", "nap-c", "--json", *place.flags).json
        return tree if tree["state"] != "pending" else None

    tree = eventually(ended, timeout=30)
    assert tree["state"] == "rejected_canceled"
    kinds = {c["kind"]: c for c in tree["children"]}
    assert kinds["cancel"]["state"] == "resolved"
    assert kinds["cancel"]["value"]["data"] == {"reason": "closing time"}
    again = troth("executions", "cancel", "nap-c", *place.flags)
    assert (again.code, again.err) == (
        6,
        "troth: execution 'nap-c' has ended (rejected_canceled)\n",
    )


def test_resume_continues_a_halted_execution(troth, place, shop) -> None:
    invoke(troth, place, "nap-h", "nap", "600")
    eventually(lambda: troth("tasks", "get", "nap-h", "--json", *place.flags).json["state"]
               == "suspended", timeout=30)  # fmt: skip
    assert troth("tasks", "halt", "nap-h", *place.flags).code == 0
    halted = troth("executions", "list", "--state", "halted", "--json", *place.flags).json
    assert [r["id"] for r in halted["executions"]] == ["nap-h"]
    assert "halted" in troth("tree", "nap-h", *place.flags).out.splitlines()[0]

    ran = troth("executions", "resume", "nap-h", *place.flags)
    assert ran.code == 0 and "resumed execution 'nap-h'" in ran.out
    again = troth("executions", "resume", "nap-h", *place.flags)
    assert (again.code, again.err) == (6, "troth: execution 'nap-h' is not halted\n")


def test_unknown_ids_and_bad_flags(troth, place, shop) -> None:
    for argv in (["tree", "nobody"], ["executions", "cancel", "nobody"],
                 ["executions", "resume", "nobody"]):  # fmt: skip
        ran = troth(*argv, *place.flags)
        assert (ran.code, ran.err) == (5, "troth: execution 'nobody': not found\n"), argv
    plain = troth("promises", "create", "just-a-promise", *place.flags)
    assert plain.code == 0, plain.err
    ran = troth("executions", "cancel", "just-a-promise", *place.flags)
    assert ran.code == 5 and "a promise without a task" in ran.err

    for argv, message in [
        (["--since", "yesterday"], "--since: expected a duration ago"),
        (["--tag", "novalue"], "--tag: expected KEY=VALUE"),
        (["--limit", "0"], "--limit: must be between 1 and 1000"),
        (["--cursor", "garbage"], "--cursor: not a cursor"),
    ]:
        ran = troth("executions", "list", *argv, *place.flags)
        assert ran.code == 2 and ran.err.startswith(f"troth: {message}"), (argv, ran.err)
    assert troth("executions", "list", "--state", "running", *place.flags).code == 2
    watch = troth("tree", "x", "--watch", "--json", *place.flags)
    assert watch.code == 2 and "--watch" in watch.err


def test_an_unreachable_server_or_a_missing_file_is_exit_3(troth, tmp_path) -> None:
    for argv in (["tree", "x"], ["executions", "list"]):
        ran = troth(*argv, "--url", "http://127.0.0.1:9")
        assert ran.code == 3, (argv, ran.err)
        assert ran.err.startswith("troth: cannot reach the server http://127.0.0.1:9")
        assert len(ran.err.splitlines()) == 1
        missing = troth(*argv, "--db", str(tmp_path / "nothing.db"))
        assert missing.code == 3 and "no database file" in missing.err, missing.err
        assert not (tmp_path / "nothing.db").exists()
