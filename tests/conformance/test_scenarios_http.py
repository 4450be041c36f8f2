"""Every per-branch scenario, replayed against one real server over HTTP.

The scenarios were written against the Lean text and pass on the oracle; here the same
requests go through uvicorn, the envelope codec, the engine and SQLite. Each starts from
``debug.reset`` with the timeouts loop paused, as the scenarios expect.
"""

from __future__ import annotations

import pytest

from tests.scenarios import ALL, Scenario

from ._client import HttpMachine


@pytest.mark.parametrize("scenario", ALL, ids=lambda f: f.__name__.removeprefix("scenario_"))
def test_scenario_over_http(scenario: Scenario, machine: HttpMachine) -> None:
    machine.fresh()
    scenario(machine)
