"""Waiting for something another process does: poll until it holds, or fail saying what
was last seen."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def eventually(check: Callable[[], Any], timeout: float = 5.0, interval: float = 0.05) -> Any:
    """Poll ``check`` until it returns something truthy; fail with its last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s (last: {value!r})")
        time.sleep(interval)
