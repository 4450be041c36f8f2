"""``troth invoke`` starts a function on an official SDK's worker group, as that SDK's own
rpc would, and ``--wait`` prints what the worker returned (``troth promises get`` shows
the official SDK's values decoded too)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.interop.sdks import Sdk


def troth(*argv: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "troth", *argv]
    return subprocess.run(command, check=False, capture_output=True, text=True, timeout=60)


def test_invoke_runs_a_function_on_an_official_sdk_worker(sdk: Sdk) -> None:
    group = sdk.unique("cli")
    sdk.worker(group)
    id = sdk.unique("hello")
    ran = troth("invoke", "hello", "--id", id, "--arg", '"operator"', "--target", group,
                "--wait", "--json", "--url", sdk.server.url)  # fmt: skip
    assert ran.returncode == 0, ran.stderr + sdk.describe()
    assert json.loads(ran.stdout)["value"]["data"] == "hello operator"
    squared = troth("invoke", "square", "--id", sdk.unique("sq"), "--arg", "7",
                    "--target", group, "--wait", "--json", "--url", sdk.server.url)  # fmt: skip
    assert squared.returncode == 0, squared.stderr + sdk.describe()
    assert json.loads(squared.stdout)["value"]["data"] == 49
