"""Per-branch scenarios of the Lean machine, runnable against anything that speaks envelopes.

Each ``scenario_<sentence>(m)`` drives ``m.apply(envelope) -> response envelope`` and
asserts the responses and ``debug.snap`` contents the Lean text (and docs/semantics.md for
the extensions and debug kinds) prescribes. Its docstring names the Lean file and branch.
``ALL`` lists every scenario, module by module, in definition order.

Each scenario expects an empty machine (a fresh oracle, or a server after ``debug.reset``
with its timeouts loop paused by ``debug.start``) whose retry timeout is 5000 ms.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

from . import debug, extensions, promises, resume, schedules, tasks, timeouts

Scenario = Callable[[Any], None]

MODULES: list[ModuleType] = [promises, tasks, resume, timeouts, schedules, extensions, debug]


def _scenarios(module: ModuleType) -> list[Scenario]:
    return [f for name, f in vars(module).items() if name.startswith("scenario_")]


ALL: list[Scenario] = [f for module in MODULES for f in _scenarios(module)]
