"""Addresses the SDK names its targets and listeners with."""

from __future__ import annotations

from troth.sdk.network import anycast, target_address


def test_targets_are_groups_or_full_addresses():
    assert target_address("payments") == "poll://any@payments"
    assert target_address("http://hook.example/x") == "http://hook.example/x"
    assert anycast("g", "w1") == "poll://any@g/w1"
