"""A bare ASGI app that answers every POST with a fixed envelope: the HTTP stack's ceiling.

Served by the same uvicorn configuration and event loop as ``troth serve``, it measures
what the HTTP layer alone costs, so the server benchmark can say how much of each request
is troth. Run it as ``python bench/echo.py PORT``.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

BODY = b'{"kind":"promise.get","head":{"corrId":"c","status":200,"version":"2026-04-01"},"data":{}}'
HEADERS = [(b"content-type", b"application/json"), (b"content-length", str(len(BODY)).encode())]


async def app(scope: Any, receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            await send({"type": message["type"] + ".complete"})
            if message["type"] == "lifespan.shutdown":
                return
    if scope["type"] != "http":
        return
    more = True
    while more:
        more = (await receive()).get("more_body", False)
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
    await send({"type": "http.response.body", "body": BODY})


def main(port: int) -> None:
    import uvicorn

    from troth.server.config import ServerConfig
    from troth.server.serve import loop_factory, uvicorn_config

    config = ServerConfig(host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(uvicorn_config(app, config))
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        runner.run(server.serve())


if __name__ == "__main__":
    main(int(sys.argv[1]))
