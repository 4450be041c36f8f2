"""Delivery addresses (docs/references.md#addresses, narrowed by docs/semantics.md "Doors").

troth accepts only what it can deliver to: ``poll://any@group[/id]``, ``poll://uni@group/id``
and ``http(s)://…``. The group is the URL's host with its case kept and its port ignored; the
id is the path without its leading ``/``; both are percent-decoded so that they compare equal
to the ``{group}`` and ``{id}`` segments of ``GET /poll/{group}/{id}``.
"""

from __future__ import annotations

import pytest

from troth.protocol.addresses import PollAddress, is_http, is_valid, parse_poll


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("poll://any@default", PollAddress("any", "default", None)),
        ("poll://any@default/", PollAddress("any", "default", None)),
        ("poll://any@workers/w-1", PollAddress("any", "workers", "w-1")),
        ("poll://uni@workers/w-1", PollAddress("uni", "workers", "w-1")),
        ("poll://uni@workers:8001/w-1", PollAddress("uni", "workers", "w-1")),
        ("poll://any@Workers/W-1", PollAddress("any", "Workers", "W-1")),
        ("poll://any@workers/a%20b", PollAddress("any", "workers", "a b")),
        ("poll://any@my%20group/x", PollAddress("any", "my group", "x")),
        ("poll://any@g/%F0%9F%99%82", PollAddress("any", "g", "🙂")),
        ("poll://any@g/a/b", PollAddress("any", "g", "a/b")),
    ],
)
def test_poll_addresses_route_to_a_group_and_maybe_an_id(
    address: str, expected: PollAddress
) -> None:
    assert parse_poll(address) == expected
    assert is_valid(address)
    assert not is_http(address)


@pytest.mark.parametrize(
    "address",
    [
        "",
        " ",
        "poll://uni@workers",  # unicast with no recipient (docs/semantics.md)
        "poll://uni@workers/",
        "poll://all@workers/w",  # only any and uni
        "poll://ANY@workers/w",  # casts are case-sensitive
        "poll://workers/w",  # no cast at all
        "poll://@workers/w",
        "poll://any@/w",  # no group
        "poll://any@",
        "poll://any@:8001/w",
        "poll:any@workers",
        "poll//any@workers",
        "any@workers",
        "ftp://host/x",
        "bash://script",  # reference-valid transports troth does not deliver to
        "gcps://project/topic",
        "mailto:a@b.c",
        "http://",
        "https://",
        "http:///path",
        "http://[::1",  # unparseable
        "http://host:99999/",  # port out of range
        "http://host:port/",
        "not a url",
        "/poll/workers/w",
    ],
)
def test_anything_else_is_not_an_address(address: str) -> None:
    assert not is_valid(address)
    assert parse_poll(address) is None


@pytest.mark.parametrize(
    "address",
    [
        "http://localhost:8001",
        "http://localhost:8001/",
        "https://example.com/hooks/resonate?token=x#frag",
        "http://127.0.0.1:9000/path",
        "http://[::1]:8080/",
        "https://user:pw@example.com/",
        "HTTPS://EXAMPLE.COM",  # schemes are case-insensitive in URLs
    ],
)
def test_http_and_https_urls_are_push_addresses(address: str) -> None:
    assert is_http(address)
    assert is_valid(address)
    assert parse_poll(address) is None
