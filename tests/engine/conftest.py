from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.engine.machine import Machine


@pytest.fixture
def machine(tmp_path: Path) -> Iterator[Machine]:
    m = Machine(tmp_path / "troth.db")
    yield m
    m.close()
