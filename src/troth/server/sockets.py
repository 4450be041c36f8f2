"""The listening sockets of ``troth serve``, bound before anything else starts.

uvicorn would bind them itself, after the app's startup, and report a taken port as a few
lines of its own log; bound here first, a port that cannot be had is one line naming it
(``CannotListen``) before the database is even opened. A host name may stand for several
addresses (``localhost``: 127.0.0.1 and ::1); the server listens on each it can, as asyncio
would (an address of a family the machine has turned off is skipped).
"""

from __future__ import annotations

import errno
import socket


class CannotListen(Exception):
    """The server cannot listen where it was told; the message says where and why."""


def listen(host: str, port: int) -> list[socket.socket]:
    """Sockets bound to every address of ``host`` on ``port`` (uvicorn starts listening)."""
    where = f"{host}:{port}" if ":" not in host else f"[{host}]:{port}"
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise CannotListen(
            f"cannot listen on {where}: {host!r} does not resolve ({e.strerror})"
        ) from None
    bound: list[socket.socket] = []
    unavailable: OSError | None = None
    try:
        for family, kind, proto, _, address in dict.fromkeys(addresses):
            try:
                sock = socket.socket(family, kind, proto)
            except OSError as e:  # a family this machine lacks (IPv6 turned off)
                unavailable = e
                continue
            bound.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(address)
            except OSError as e:
                if e.errno != errno.EADDRNOTAVAIL:
                    raise
                # ``localhost``'s ::1 where IPv6 is off: the other addresses will do.
                bound.pop().close()
                unavailable = e
        if not bound:
            raise unavailable or OSError(errno.EADDRNOTAVAIL, "no address")
    except OSError as e:
        for sock in bound:
            sock.close()
        raise CannotListen(_why(e, where, port)) from None
    return bound


def _why(error: OSError, where: str, port: int) -> str:
    if error.errno == errno.EADDRINUSE:
        return (
            f"cannot listen on {where}: port {port} is already in use (another troth serve?);"
            " stop that process or choose another --port"
        )
    if error.errno == errno.EACCES:
        return f"cannot listen on {where}: not allowed (ports below 1024 need privileges)"
    if error.errno == errno.EADDRNOTAVAIL:
        return f"cannot listen on {where}: no such address on this machine (--host)"
    return f"cannot listen on {where}: {error.strerror or error}"
