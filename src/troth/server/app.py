"""The ASGI application: routes, and the lifetime of the background loops.

| route                                   | answer                                          |
|-----------------------------------------|-------------------------------------------------|
| ``POST /``                              | the RPC envelope (``rpc``); 405 for other verbs |
| ``GET /poll/{group}/{id}``              | the worker's SSE stream (``sse``)               |
| ``POST /poll/{group}/{id}``             | acknowledges frames of a stream (``sse``)       |
| ``GET /health``                         | 200 while the process serves                    |
| ``GET /ready``                          | 200 when storage answers a ping, else 503       |
| ``/console`` and below                  | the web console (``console``), unless off       |
| ``GET /api/executions`` and below       | the views' JSON API (``api``)                   |
| ``GET /metrics``                        | Prometheus metrics (``metrics``), unless off    |
| ``/promises``, ``/tasks``, ``/schedules`` and below, any verb | 410: the pre-2026 REST API |
| anything else                           | 404, empty                                      |

``POST /`` takes ``application/json`` only (415 otherwise), and pages of other origins
may call the server from a browser only as ``--cors-origins`` allows (``cors``).

The app owns the service it is given: ASGI lifespan startup starts the timeouts and delivery
loops; shutdown ends every poll stream, stops the loops and closes the service.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from urllib.parse import unquote_to_bytes

from troth.server.api import PREFIX as API
from troth.server.api import Api
from troth.server.asgi import (
    JSON,
    TEXT,
    BodyTooLarge,
    Disconnected,
    Receive,
    Scope,
    Send,
    is_json,
    read_body,
    respond,
)
from troth.server.auth import Auth, Denied, bearer
from troth.server.clock import MonotonicWallClock
from troth.server.config import ServerConfig
from troth.server.console import Console
from troth.server.cors import Cors, Http, parse_origins
from troth.server.delivery import DeliveryLoop
from troth.server.metrics import CONTENT_TYPE, ServerMetrics
from troth.server.poll import PollHub
from troth.server.poll_transport import PollTransport
from troth.server.push import Pusher
from troth.server.push_transport import PushTransport
from troth.server.rpc import Rpc
from troth.server.sse import acknowledge, acknowledges, stream
from troth.server.targets import PushAllowList
from troth.server.timers import DeferringTimers
from troth.storage.service import Service
from troth.storage.timeouts_loop import TimeoutsLoop

log = logging.getLogger(__name__)

_GONE = b'{"error":"This endpoint is no longer supported. Please update to the latest SDK."}'
_LEGACY = ("/promises", "/tasks", "/schedules")
_NOT_JSON = b"Unsupported Content-Type: POST / takes application/json"
_ACK_LIMIT = 1024  # bytes: an acknowledgement is a token and a number
# After a request pokes the timeouts loop, it waits this long for more before it reads the
# next deadline again: a busy server reads it a few dozen times a second, not per request.
_COALESCE_MS = 20


class App:
    def __init__(self, service: Service, config: ServerConfig) -> None:
        self.service = service
        self.config = config
        self.clock = MonotonicWallClock()
        self.metrics = (
            ServerMetrics(backend=service.backend, now=self.clock.now) if config.metrics else None
        )
        if self.metrics is not None:
            service.events = self.metrics
        self.timers = DeferringTimers(service)
        self.timeouts = TimeoutsLoop(
            self.timers,
            now=self.clock.now,
            coalesce_ms=_COALESCE_MS,
            # Other servers on the database arm deadlines this one does not hear of.
            max_sleep_ms=config.timeouts_max_sleep,
        )
        self.hub = PollHub(
            max_connections=config.poll_max_connections,
            buffer_size=config.poll_buffer_size,
            write_timeout_ms=config.poll_write_timeout,
            # A new connection may take messages held back for want of one: deliver now.
            on_connect=lambda: service.outbox_changed().set(),
            max_per_group=config.poll_max_per_group,
            max_per_owner=config.poll_max_per_client,
        )
        self.push_allow = PushAllowList(config.push_allow, config.push_allow_credentials)
        self.pusher = Pusher(
            concurrency=config.push_concurrency,
            timeout_ms=config.push_timeout,
            retries=config.push_retries,
            backoff_ms=config.push_backoff,
            backoff_max_ms=config.push_backoff_max,
            token=config.push_auth_token,
            allow=self.push_allow,
            metrics=self.metrics,
        )
        self.delivery = DeliveryLoop(
            service,
            server_url=config.url,
            groups=self.hub.groups,
            batch_size=config.delivery_batch_size,
            interval_ms=config.delivery_interval,
            claim_ttl_ms=config.delivery_claim_ttl,
            metrics=self.metrics,
            now=self.clock.now,
        )
        self.delivery.add(
            PollTransport(self.hub, self.delivery, unblock_hold_ms=config.poll_unblock_hold)
        )
        self.delivery.add(PushTransport(self.pusher, self.delivery, metrics=self.metrics))
        self.auth = Auth.from_config(config)
        self.rpc = Rpc(
            service,
            self.clock,
            self.timeouts,
            debug=config.debug,
            auth=self.auth,
            push_allow=self.push_allow,
            metrics=self.metrics,
        )
        self.console = (
            Console(service, self.rpc, self.auth, read_only=config.console_read_only)
            if config.console
            else None
        )
        self.api = Api(service, self.auth)
        self._loops: list[asyncio.Task[None]] = []
        origins = parse_origins(config.cors_origins)
        self._serve: Http = Cors(self._http, origins) if origins else self._http

    async def start(self) -> None:
        self._loops = [
            asyncio.create_task(self.timeouts.run(), name="troth-timeouts"),
            asyncio.create_task(self.delivery.run(), name="troth-delivery"),
        ]

    async def stop(self) -> None:
        self.hub.close_all()
        for loop in self._loops:
            loop.cancel()
        await asyncio.gather(*self._loops, return_exceptions=True)  # each catches its own
        self._loops = []
        await self.delivery.stop()
        await self.pusher.close()
        await self.service.close()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self._serve(scope, receive, send)
        elif scope["type"] == "lifespan":
            await self._lifespan(receive, send)

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope["path"]
        method: str = scope["method"]
        if path == "/":
            if method != "POST":
                await respond(send, 405)
            else:
                await self._post(scope, receive, send)
        elif path.startswith("/poll/"):
            await self._poll(scope, receive, send)
        elif path == "/health":
            await respond(send, 200 if method in ("GET", "HEAD") else 405)
        elif path == "/ready":
            if method not in ("GET", "HEAD"):
                await respond(send, 405)
            else:
                await respond(send, 200 if await self._ready() else 503)
        elif path == "/metrics" and self.metrics is not None:
            await self._metrics(scope, send, self.metrics)
        elif self.console is not None and (path == "/console" or path.startswith("/console/")):
            await self.console(scope, receive, send)
        elif path == API or path.startswith(API + "/"):
            await self.api(scope, receive, send)
        elif any(path == p or path.startswith(p + "/") for p in _LEGACY):
            await respond(send, 410, _GONE, JSON)
        else:
            await respond(send, 404)

    async def _post(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not is_json(scope):
            # A page of any origin may send text/plain or a form without asking (``cors``):
            # such a request must do nothing, so it is refused before its body is read.
            await respond(send, 415, _NOT_JSON, TEXT, close=True)
            return
        limit = self.config.max_body_bytes
        try:
            body = await read_body(scope, receive, limit)
        except BodyTooLarge:
            message = f"Request body too large: the limit is {limit} bytes"
            await respond(send, 413, message.encode(), TEXT, close=True)
            return
        except Disconnected:
            return
        token = bearer(scope["headers"]) if self.auth is not None else None
        status, response = await self.rpc(body, token, scope["headers"])
        await respond(send, status, response, JSON, retry_after=1 if status == 503 else None)

    async def _poll(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Split the raw path so a percent-encoded "/" stays inside its segment.
        raw: bytes = scope.get("raw_path") or scope["path"].encode()
        parts = raw.split(b"?", 1)[0].split(b"/")
        if len(parts) != 4 or not parts[2] or not parts[3]:
            await respond(send, 404)
            return
        group, id = (unquote_to_bytes(p).decode("utf-8", "replace") for p in parts[2:])
        owner = None  # with auth off, one anonymous client
        if self.auth is not None:
            # troth scopes polls too (the reference only authenticates them): a token
            # scoped to a prefix reads only the groups whose names start with it.
            try:
                grant = self.auth.authenticate(bearer(scope["headers"]))
                grant.check_group(group)
            except Denied as e:
                await respond(send, e.status, e.message.encode(), TEXT)
                return
            owner = grant.owner
        if scope["method"] == "POST":
            try:
                body = await read_body(scope, receive, _ACK_LIMIT)
            except BodyTooLarge:
                await respond(send, 413, close=True)
                return
            except Disconnected:
                return  # nobody to answer
            await acknowledge(self.hub, group, id, body, send)
        elif scope["method"] == "GET":
            await stream(
                self.hub,
                group,
                id,
                receive,
                send,
                keepalive_ms=self.config.poll_keepalive,
                acks=acknowledges(scope.get("query_string", b"")),
                owner=owner,
            )
        else:
            await respond(send, 405)

    async def _metrics(self, scope: Scope, send: Send, metrics: ServerMetrics) -> None:
        if scope["method"] not in ("GET", "HEAD"):
            await respond(send, 405)
            return
        token = self.config.metrics_token
        if token is not None and not hmac.compare_digest(
            (bearer(scope["headers"]) or "").encode(), token.encode()
        ):
            await respond(send, 401, b"GET /metrics needs the --metrics-token as its bearer", TEXT)
            return
        try:
            exposition = await metrics.scrape(
                self.service, self.timers, self.hub.group_sizes(), self.service
            )
        except Exception:
            log.exception("reading the metrics failed")
            await respond(send, 503)
            return
        await respond(send, 200, exposition, CONTENT_TYPE)

    async def _ready(self) -> bool:
        try:
            return await self.service.ping()
        except Exception:
            log.exception("storage ping failed")
            return False

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self.start()
                except Exception as e:
                    log.exception("startup failed")
                    await send({"type": "lifespan.startup.failed", "message": str(e)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.stop()
                await send({"type": "lifespan.shutdown.complete"})
                return
