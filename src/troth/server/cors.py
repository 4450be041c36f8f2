"""Browser access across origins (CORS): off unless ``--cors-origins`` names the origins.

A browser lets a page read a response from another origin only when the response says the
page's origin may; without that, a page can still *send* a simple request (a form's, or a
``text/plain`` fetch), which is why ``POST /`` also insists on ``application/json`` (a
content type a page cannot send across origins without asking first). The question asked
first is the preflight, an ``OPTIONS`` request: answered here for allowed origins only, so
a page of any other origin is never allowed to send JSON, an ``Authorization`` header, or
to read an answer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from troth.server.asgi import Event, Receive, Scope, Send, header, respond

Http = Callable[[Scope, Receive, Send], Awaitable[None]]

ANY = "*"
# What a page may send besides simple requests, and how long its browser may remember that.
_METHODS = b"GET, POST"
_HEADERS = b"authorization, content-type"
_MAX_AGE = b"600"


def parse_origins(setting: str | None) -> frozenset[str]:
    """The origins of a comma-separated setting, as browsers write them (lower case, no
    trailing slash); ``*`` stands for any."""
    if not setting:
        return frozenset()
    return frozenset(o.strip().rstrip("/").lower() for o in setting.split(",") if o.strip())


class Cors:
    """Wraps the HTTP app: answers the preflights of allowed origins, and marks every
    response to an allowed origin as readable by it. Requests of other origins, and those
    without one (every non-browser client), pass through untouched."""

    def __init__(self, app: Http, origins: frozenset[str]) -> None:
        self.app = app
        self.origins = origins

    def allows(self, origin: str) -> bool:
        return ANY in self.origins or origin.lower() in self.origins

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = header(scope, b"origin")
        if raw is None or not self.allows(raw.decode("latin-1")):
            await self.app(scope, receive, send)
            return
        allowed = [(b"access-control-allow-origin", raw), (b"vary", b"origin")]
        if scope["method"] == "OPTIONS" and header(scope, b"access-control-request-method"):
            allowed += [
                (b"access-control-allow-methods", _METHODS),
                (b"access-control-allow-headers", _HEADERS),
                (b"access-control-max-age", _MAX_AGE),
            ]
            await respond(send, 204, extra=allowed)
            return
        allowed.append((b"access-control-expose-headers", b"retry-after"))

        async def marked(event: Event) -> None:
            if event["type"] == "http.response.start":
                event = {**event, "headers": [*event.get("headers", ()), *allowed]}
            await send(event)

        await self.app(scope, receive, marked)
