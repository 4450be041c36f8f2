"""troth.server: the HTTP server in front of a storage ``Service``.

``App`` is the ASGI application (RPC envelope, SSE poll streams, health); the delivery loop
drains the outbox to poll connections and HTTP push targets; the timeouts loop fires stored
deadlines in wall-clock time; ``run`` serves it all under uvicorn.
"""

from troth.server.app import App
from troth.server.config import ServerConfig
from troth.server.runner import run

__all__ = ["App", "ServerConfig", "run"]
