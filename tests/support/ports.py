"""A free TCP port on the loopback interface, for a server a test starts."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port nothing listens on right now. The OS picks it; another process could take it
    before the caller binds, which on a test machine does not happen in practice."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
