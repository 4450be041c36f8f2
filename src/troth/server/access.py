"""The access log (``--access-log``): one line per HTTP request, once it is answered.

Each line is logged at INFO by ``troth.server.access``, whatever ``--log-level`` says,
with the client address, method, path, the request's kind and ids (``POST /`` only, once
the envelope decoded; ``-`` otherwise), the status (``-`` when the client left before an
answer) and the duration in milliseconds, in the text
(``127.0.0.1 POST / promise.create promise_id=p1 200 0.8ms``) and, in the JSON format, as
fields. A poll stream's line comes when the stream ends, its duration the stream's life.
The server wraps its app in it only when the log is on, so a server without it pays
nothing.
"""

from __future__ import annotations

import logging
import time

from troth.protocol.subjects import subject_ids
from troth.server.asgi import Event, Receive, Scope, Send
from troth.server.cors import Http
from troth.server.logs import served

log = logging.getLogger(__name__)


class AccessLog:
    def __init__(self, app: Http) -> None:
        self._app = app
        # Asking for the access log is asking for its lines, whatever --log-level says.
        log.setLevel(logging.INFO)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        started = time.perf_counter()
        status: int | None = None

        async def answering(event: Event) -> None:
            nonlocal status
            if event["type"] == "http.response.start":
                status = event["status"]
            await send(event)

        try:
            await self._app(scope, receive, answering)
        finally:
            self._log(scope, status, (time.perf_counter() - started) * 1000)

    def _log(self, scope: Scope, status: int | None, duration_ms: float) -> None:
        request = served()
        ids = subject_ids(request.data) if request is not None else {}
        client = scope.get("client")
        fields = {
            "client": client[0] if client else None,
            "method": scope["method"],
            "path": scope["path"],
            "kind": str(request.kind) if request is not None else None,
            "status": status,
            "duration_ms": round(duration_ms, 3),
            **ids,
        }
        log.info(
            "%s %s %s %s%s %s %.1fms",
            fields["client"] or "-",
            fields["method"],
            fields["path"],
            fields["kind"] or "-",
            "".join(f" {field}={id}" for field, id in ids.items()),
            "-" if status is None else status,
            duration_ms,
            extra=fields,
        )
