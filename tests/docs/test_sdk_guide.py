"""The SDK guide covers the whole public API: every name ``troth`` exports is in it."""

from __future__ import annotations

from pathlib import Path

import troth

GUIDE = Path(__file__).parents[2] / "docs" / "sdk.md"


def test_every_public_name_of_troth_appears_in_the_sdk_guide() -> None:
    text = GUIDE.read_text()
    names = [name for name in troth.__all__ if not name.startswith("__")]
    missing = [name for name in names if f"`{name}" not in text]
    assert not missing, f"docs/sdk.md does not mention {missing}"
