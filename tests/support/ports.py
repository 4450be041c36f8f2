"""Local addresses for tests: a free TCP port on the loopback interface, and a host name
other than localhost that resolves to it."""

from __future__ import annotations

import socket

import pytest


def free_port() -> int:
    """A port nothing listens on right now. The OS picks it; another process could take it
    before the caller binds, which on a test machine does not happen in practice."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def loopback_name() -> str:
    """A host name other than localhost that resolves only to loopback (/etc/hosts)."""
    for name in (socket.gethostname(), "localhost.localdomain", "ip6-localhost"):
        if name == "localhost" or name.endswith(".localhost"):
            continue
        try:
            infos = socket.getaddrinfo(name, 80, type=socket.SOCK_STREAM)
        except OSError:
            continue
        if infos and all(str(i[4][0]) in ("127.0.0.1", "::1") for i in infos):
            return name
    pytest.skip("no host name other than localhost resolves to loopback here")
