"""Addresses the SDK names its targets and listeners with."""

from __future__ import annotations

import pytest

from troth.sdk.http import server_urls
from troth.sdk.network import anycast, target_address


def test_targets_are_groups_or_full_addresses():
    assert target_address("payments") == "poll://any@payments"
    assert target_address("http://hook.example/x") == "http://hook.example/x"
    assert anycast("g", "w1") == "poll://any@g/w1"


def test_server_urls_assume_http_and_refuse_other_schemes() -> None:
    assert server_urls("localhost:8001, https://b.example/") == [
        "http://localhost:8001",
        "https://b.example",
    ]
    with pytest.raises(ValueError, match="ftp://x"):
        server_urls("ftp://x")
