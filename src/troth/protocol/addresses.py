"""Delivery addresses: where execute and unblock messages go (docs/references.md#addresses).

``poll://any@group[/id]`` reaches one SSE connection of a group, preferring the named id;
``poll://uni@group/id`` reaches only that id; ``http(s)://…`` is pushed to with a POST.
"""

from __future__ import annotations

from typing import NamedTuple
from urllib.parse import unquote, urlsplit


class PollAddress(NamedTuple):
    cast: str  # "any" or "uni"
    group: str
    id: str | None


def parse_poll(address: str) -> PollAddress | None:
    """The routing of a poll address, or None when it is not one."""
    try:
        parts = urlsplit(address)
    except ValueError:
        return None
    if parts.scheme != "poll" or "@" not in parts.netloc:
        return None
    cast, _, hostport = parts.netloc.rpartition("@")
    group = hostport.rsplit(":", 1)[0] if ":" in hostport else hostport
    if cast not in ("any", "uni") or not group:
        return None
    path = unquote(parts.path.lstrip("/"))
    if cast == "uni" and not path:
        # A unicast address names its one recipient; without an id nothing could receive it.
        return None
    return PollAddress(cast, unquote(group), path or None)


def is_http(address: str) -> bool:
    try:
        parts = urlsplit(address)
        parts.port  # noqa: B018 - urlsplit defers the port check; a bad port is a bad URL
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def is_valid(address: str) -> bool:
    """True for the addresses troth can deliver to: poll and http(s)."""
    return is_http(address) or parse_poll(address) is not None
