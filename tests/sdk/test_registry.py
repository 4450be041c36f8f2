"""The registry: names, versions, and which functions are durable."""

from __future__ import annotations

import pytest

from troth.sdk import Context
from troth.sdk.registry import Registry, takes_context


async def durable(ctx: Context, x: int) -> int:
    return x


async def plain(x: int) -> int:
    return x


def test_durable_functions_are_those_taking_a_context():
    assert takes_context(durable)
    assert takes_context(lambda ctx: None)
    assert not takes_context(plain)


def test_latest_version_is_the_default_and_old_versions_stay_reachable():
    registry = Registry()
    registry.add(plain, name="f", version=1)
    registry.add(durable, name="f", version=2)
    assert registry.get("f").version == 2
    assert registry.get("f", 1).fn is plain
    assert registry.get("f", 3) is None
    assert registry.of(durable).name == "f"


def test_a_name_and_version_cannot_be_taken_twice():
    registry = Registry()
    registry.add(plain, name="f")
    with pytest.raises(ValueError, match="already registered"):
        registry.add(durable, name="f")
    with pytest.raises(ValueError, match="explicit name"):
        registry.add(lambda: None)
