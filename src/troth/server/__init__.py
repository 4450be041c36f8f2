"""troth.server: the HTTP server in front of a storage ``Service``.

``App`` is the ASGI application (RPC envelope, SSE poll streams, health); the delivery loop
drains the outbox to poll connections and HTTP push targets; the timeouts loop fires stored
deadlines in wall-clock time; ``run`` serves it all under uvicorn.

The names are imported on first use, so that ``troth.server.config`` (which the ``troth``
command reads to build its flags) imports without the ``server`` extra's packages.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from troth.server.app import App
    from troth.server.config import ServerConfig
    from troth.server.serve import run

__all__ = ["App", "ServerConfig", "run"]

_HOMES = {
    "App": "troth.server.app",
    "ServerConfig": "troth.server.config",
    "run": "troth.server.serve",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'troth.server' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
