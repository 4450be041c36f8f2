"""Executions of the official Resonate SDKs (TypeScript, Python) read sensibly through the
views' JSON API: the function from the invocation, an rpc child as ``rpc``, a sleep as
``sleep``, steps as ``run``, and the executions list names them (docs/cli.md)."""

from __future__ import annotations

from typing import Any

from tests.interop.sdks import Sdk


def tree(sdk: Sdk, id: str) -> dict[str, Any]:
    response = sdk.server.http.get(f"/api/executions/{id}")
    assert response.status_code == 200, response.text
    return response.json()["tree"]


def test_an_official_sdk_execution_reads_as_a_call_tree(sdk: Sdk) -> None:
    group_a, group_b = sdk.unique("ga"), sdk.unique("gb")
    sdk.worker(group_a)
    sdk.worker(group_b)
    caller, sleeper = sdk.unique("caller"), sdk.unique("sleeper")
    sdk.invoke(caller, "caller", group_a, group_b, 1).result()
    sdk.invoke(sleeper, "sleeper", group_a, 100).result()

    called = tree(sdk, caller)
    assert (called["kind"], called["function"], called["state"]) == ("root", "caller", "resolved")
    assert [(c["kind"], c["function"], c["state"]) for c in called["children"]] == [
        ("rpc", "callee", "resolved")
    ]
    slept = tree(sdk, sleeper)
    assert slept["function"] == "sleeper"
    assert [c["kind"] for c in slept["children"]] == ["run", "sleep", "run"]
    assert all(c["value"]["decoded"] for c in slept["children"] if c["kind"] == "run")

    listed = sdk.server.http.get("/api/executions", params={"limit": "1000"}).json()
    functions = {row["id"]: row["function"] for row in listed["executions"]}
    assert (functions[caller], functions[sleeper]) == ("caller", "sleeper")
    assert called["children"][0]["id"] not in functions  # a child, not an execution of its own
