"""troth's SDK and the official TypeScript SDK call each other's functions through rpc.

Each side runs in its own OS process against one `troth serve`: troth workers run
interop/troth/sdk.py, TypeScript workers interop/ts/sdk.mjs. A call's param is
`{func, args}` as base64 JSON and its value base64 JSON, written by one SDK and read by
the other; a failure is the `{__type: "error", name, message, stack}` object both read.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.interop.sdks import INTEROP, Invocation, Sdk, sdk_command, settle_json
from tests.support.servers import TrothServer
from tests.tracing.spans import read as spans_of
from tests.tracing.spans import traced_env

# Plain JSON in all its kinds; what the value encodings of both SDKs must carry unchanged.
JSON_VALUES: list[Any] = [
    {"text": 'héllo ☃ 😀 "quoted" \\ / \n\t', "empty": "", "": "empty key"},
    [0, -1, 2**53, -(2**53), 3.5, -0.25, 1e300, 1.5e-300],
    [True, False, None],
    {"nested": {"deeper": [[], {}, [{"x": [1, {"y": None}]}]]}},
    "a plain string",
    12345,
    None,
]


@pytest.fixture
def ts(server: TrothServer, tmp_path: Path) -> Iterator[Sdk]:
    s = Sdk(name="ts", server=server, work=tmp_path / "ts", argv0=sdk_command("ts"))
    s.work.mkdir()
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def troth(server: TrothServer, tmp_path: Path) -> Iterator[Sdk]:
    command = [sys.executable, str(INTEROP / "troth" / "sdk.py")]
    s = Sdk(name="troth", server=server, work=tmp_path / "troth", argv0=command)
    s.work.mkdir()
    try:
        yield s
    finally:
        s.close()


def error_of(run: Invocation, timeout: float = 30.0) -> str:
    """The `ERROR ...` line of an invocation expected to fail."""
    try:
        run.proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        run.proc.kill()
        run.proc.wait()
        pytest.fail(f"invoke did not finish in {timeout}s\n{run.describe()}")
    for line in run.out.read_text(errors="replace").splitlines():
        if line.startswith("ERROR "):
            return line[len("ERROR ") :]
        if line.startswith("RESULT "):
            pytest.fail(f"invoke succeeded: {line}\n{run.describe()}")
    pytest.fail(f"invoke printed no error (exit {run.proc.returncode})\n{run.describe()}")


def describe_both(ts: Sdk, troth: Sdk) -> Any:
    return lambda: ts.describe() + "\n" + troth.describe()


def with_both(run: Invocation, ts: Sdk, troth: Sdk) -> Invocation:
    run.describe = describe_both(ts, troth)
    return run


# -- a troth workflow calls TypeScript -----------------------------------------------------


def test_troth_workflow_rpcs_a_typescript_function(ts: Sdk, troth: Sdk) -> None:
    py_group, ts_group = troth.unique("py"), ts.unique("ts-group")
    py, node = troth.worker(py_group), ts.worker(ts_group)
    run = with_both(
        troth.invoke(troth.unique("caller"), "caller", py_group, ts_group, 41), ts, troth
    )
    assert run.result() == {"pid": py.pid, "callee": {"pid": node.pid, "value": 42}}


def test_a_traced_troth_workflow_rpcs_a_typescript_function_in_one_trace(
    ts: Sdk, troth: Sdk, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The troth processes trace (docs/tracing.md), so the promise the TypeScript worker
    # runs carries a traceparent in its param.headers: it must read the param as before.
    folder = tmp_path / "spans"
    folder.mkdir()
    for name, value in traced_env(folder, "troth").items():
        monkeypatch.setenv(name, value)
    py_group, ts_group = troth.unique("py"), ts.unique("ts-group")
    py, node = troth.worker(py_group), ts.worker(ts_group)
    id = troth.unique("traced")
    run = with_both(troth.invoke(id, "caller", py_group, ts_group, 41), ts, troth)
    assert run.result() == {"pid": py.pid, "callee": {"pid": node.pid, "value": 42}}

    traced = [s for s in spans_of(folder) if s["attributes"].get("troth.id", "").startswith(id)]
    (start,) = [s for s in traced if s["name"] == "rpc caller"]
    assert {s["trace"] for s in traced} == {start["trace"]}
    runs = [s for s in traced if s["name"] == "execute caller"]
    assert len(runs) == 2  # before the TypeScript function answered, and after
    # The second run's rpc met the settled promise: marked, the function not run again.
    calls = [s for s in traced if s["name"] == "rpc callee"]
    assert [s["attributes"].get("troth.replayed", False) for s in calls] == [False, True]
    assert [s["parent"] for s in calls] == [r["span"] for r in runs]


def test_json_values_survive_troth_to_typescript_and_back(ts: Sdk, troth: Sdk) -> None:
    py_group, ts_group = troth.unique("py"), ts.unique("ts-group")
    troth.worker(py_group), ts.worker(ts_group)
    run = troth.invoke(troth.unique("relay"), "relay", py_group, ts_group, "echo", *JSON_VALUES)
    assert with_both(run, ts, troth).result() == JSON_VALUES


def test_a_typescript_rejection_reaches_the_troth_workflow_as_a_remote_error(
    ts: Sdk, troth: Sdk
) -> None:
    py_group, ts_group = troth.unique("py"), ts.unique("ts-group")
    troth.worker(py_group), ts.worker(ts_group)
    run = troth.invoke(troth.unique("catch"), "catcher", py_group, ts_group, "boom", "kaput!")
    assert with_both(run, ts, troth).result() == {
        "class": "RemoteError",
        "type": "BoomError",
        "message": "kaput!",
        "has_traceback": True,  # the TS stack travels with the error
        "errors": [],
    }


def test_a_typescript_aggregate_error_reaches_troth_with_its_inner_errors(
    ts: Sdk, troth: Sdk
) -> None:
    py_group, ts_group = troth.unique("py"), ts.unique("ts-group")
    troth.worker(py_group), ts.worker(ts_group)
    run = troth.invoke(troth.unique("agg"), "catcher", py_group, ts_group, "aggregate", "both")
    assert with_both(run, ts, troth).result() == {
        "class": "RemoteError",
        "type": "AggregateError",
        "message": "both",
        "has_traceback": True,
        "errors": [["Error", "Error: first"], ["RangeError", "RangeError: second"]],
    }


def test_typescript_undefined_is_none_in_troth(ts: Sdk, troth: Sdk) -> None:
    py_group, ts_group = troth.unique("py"), ts.unique("ts-group")
    troth.worker(py_group), ts.worker(ts_group)
    run = troth.invoke(troth.unique("none"), "relay", py_group, ts_group, "nothing")
    assert with_both(run, ts, troth).result() is None


def test_a_troth_client_rpc_to_a_typescript_function_that_throws_raises(
    ts: Sdk, troth: Sdk
) -> None:
    ts_group = ts.unique("ts-group")
    ts.worker(ts_group)
    run = with_both(troth.invoke(troth.unique("boom"), "boom", ts_group, "no way"), ts, troth)
    assert error_of(run) == "RemoteError: BoomError: no way"


# -- TypeScript calls troth ----------------------------------------------------------------


def test_typescript_rpcs_a_function_on_a_troth_worker(ts: Sdk, troth: Sdk) -> None:
    py_group = troth.unique("py")
    py = troth.worker(py_group)
    run = with_both(ts.invoke(ts.unique("callee"), "callee", py_group, 41), ts, troth)
    assert run.result() == {"pid": py.pid, "value": 42}


def test_typescript_workflow_rpcs_a_troth_function(ts: Sdk, troth: Sdk) -> None:
    py_group, ts_group = troth.unique("py"), ts.unique("ts-group")
    py, node = troth.worker(py_group), ts.worker(ts_group)
    run = with_both(ts.invoke(ts.unique("caller"), "caller", ts_group, py_group, 41), ts, troth)
    assert run.result() == {"pid": node.pid, "callee": {"pid": py.pid, "value": 42}}


def test_json_values_survive_typescript_to_troth_and_back(ts: Sdk, troth: Sdk) -> None:
    py_group, ts_group = troth.unique("py"), ts.unique("ts-group")
    troth.worker(py_group), ts.worker(ts_group)
    run = ts.invoke(ts.unique("relay"), "relay", ts_group, py_group, "echo", *JSON_VALUES)
    assert with_both(run, ts, troth).result() == JSON_VALUES


def test_a_troth_failure_reaches_the_typescript_workflow_as_an_error(ts: Sdk, troth: Sdk) -> None:
    py_group, ts_group = troth.unique("py"), ts.unique("ts-group")
    troth.worker(py_group), ts.worker(ts_group)
    run = ts.invoke(ts.unique("catch"), "catcher", ts_group, py_group, "boom", "kaput!")
    assert with_both(run, ts, troth).result() == {
        "isError": True,
        "name": "ValueError",
        "message": "kaput!",
    }


def test_a_troth_exception_group_reaches_typescript_as_an_aggregate_error(
    ts: Sdk, troth: Sdk
) -> None:
    py_group, ts_group = troth.unique("py"), ts.unique("ts-group")
    troth.worker(py_group), ts.worker(ts_group)
    run = ts.invoke(ts.unique("agg"), "catcher", ts_group, py_group, "boom_group", "two failed")
    assert with_both(run, ts, troth).result() == {
        "isError": True,
        "name": "ExceptionGroup",
        "message": "two failed",
        "errors": [["ValueError", "first"], ["TypeError", "second"]],
    }


def test_a_troth_custom_error_reaches_typescript_by_its_name_and_message(
    ts: Sdk, troth: Sdk
) -> None:
    # troth's own fields in the error record (module, args, attrs) do not disturb TS.
    py_group, ts_group = troth.unique("py"), ts.unique("ts-group")
    troth.worker(py_group), ts.worker(ts_group)
    run = ts.invoke(ts.unique("declined"), "catcher", ts_group, py_group, "declined", "o-1", 5)
    assert with_both(run, ts, troth).result() == {
        "isError": True,
        "name": "PaymentDeclined",
        "message": "declined o-1 (5 cents)",
    }


def test_a_troth_custom_error_reaches_a_troth_client_process_as_its_class(
    ts: Sdk, troth: Sdk
) -> None:
    # The client process runs the same script, so it has the class: rebuilt with its
    # attributes (its __str__ reads them), not a RemoteError.
    py_group = troth.unique("py")
    troth.worker(py_group)
    run = with_both(
        troth.invoke(troth.unique("declined"), "declined", py_group, "o-2", 7), ts, troth
    )
    assert error_of(run) == "PaymentDeclined: declined o-2 (7 cents)"


def test_a_typescript_client_rpc_to_a_troth_function_that_raises_throws(
    ts: Sdk, troth: Sdk
) -> None:
    py_group = troth.unique("py")
    troth.worker(py_group)
    run = with_both(ts.invoke(ts.unique("boom"), "boom", py_group, "no way"), ts, troth)
    assert error_of(run) == "no way"


def test_a_three_hop_chain_typescript_to_troth_to_typescript(ts: Sdk, troth: Sdk) -> None:
    py_group, ts_group = troth.unique("py"), ts.unique("ts-group")
    troth.worker(py_group), ts.worker(ts_group)
    # TS client -> troth relay -> TS echo: troth both receives a TS param and sends one.
    run = ts.invoke(ts.unique("chain"), "relay", py_group, ts_group, "echo", {"k": [1, "v"]})
    assert with_both(run, ts, troth).result() == [{"k": [1, "v"]}]


# -- cancellation ---------------------------------------------------------------------------


def test_a_troth_workflow_canceled_over_http_waits_for_its_typescript_child(
    ts: Sdk, troth: Sdk, server: TrothServer
) -> None:
    """A plain HTTP client cancels a troth workflow the documented way (create its
    ``<id>:cancel`` promise, resolve it with a reason) while it awaits a TypeScript child.
    The child is asked in turn (a cancel promise on its branch, which the TypeScript SDK
    ignores) and finishes unaffected; the workflow observes the cancellation at its next
    durable call and ends canceled with the reason."""
    py_group, ts_group = troth.unique("py"), ts.unique("ts-group")
    troth.worker(py_group), ts.worker(ts_group)
    id = troth.unique("relay")
    run = with_both(
        troth.invoke(id, "relay_then_sleep", py_group, ts_group, "sleeper", 3000), ts, troth
    )
    child = f"{id}:0"
    deadline = time.monotonic() + 30
    while server.send("promise.get", {"id": child}).status_code != 200:
        assert time.monotonic() < deadline, run.describe()
        time.sleep(0.05)
    root = server.ok("promise.get", {"id": id})["promise"]
    tags = {"resonate:origin": id, "resonate:parent": id, "resonate:branch": id}
    create = {"id": f"{id}:cancel", "timeoutAt": root["timeoutAt"], "tags": tags}
    server.ok("promise.create", create)
    settle_json(server, f"{id}:cancel", {"reason": "stopped over HTTP"})
    error = error_of(run)
    assert error.startswith("CanceledError") and "stopped over HTTP" in error, error
    settled = server.ok("promise.get", {"id": child})["promise"]
    assert settled["state"] == "resolved", settled
    asked = server.ok("promise.get", {"id": f"{child}.cancel"})["promise"]
    assert asked["state"] == "resolved"  # asked, and ignored
