"""``POST /``: one request envelope in, one response envelope out.

The order follows the reference server (docs/references.md#decoding-order): decode the
envelope (400), authenticate (401) and authorize (403; see ``auth``), decode and check the
data (400), refuse debug kinds unless debug mode (403), pick ``now``, run the kind. Every
outcome is an envelope whose HTTP status is its ``head.status``; nothing a client sends can
crash the server, and an infrastructure failure is a 500 envelope with the request's kind
and corrId (503 when the backend says the request lost a write race and is safe to send
again). A 5xx body names an error id and nothing of the failure; the log has the rest under
that id.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from troth.engine import READ_ONLY
from troth.protocol.envelope import (
    BadRequest,
    Request,
    decode_data,
    decode_envelope,
    encode_response,
)
from troth.protocol.kinds import Kind
from troth.protocol.requests import DebugTickRequest
from troth.protocol.responses import EMPTY, Reply
from troth.server.auth import Auth, Denied
from troth.server.clock import MonotonicWallClock
from troth.server.logs import serving
from troth.server.targets import PushAllowList, door_refusal
from troth.storage.service import Retriable, Service
from troth.storage.timeouts_loop import TimeoutsLoop

if TYPE_CHECKING:
    from troth.server.metrics import ServerMetrics
    from troth.server.otel import RequestSpans

log = logging.getLogger(__name__)


class Rpc:
    def __init__(
        self,
        service: Service,
        clock: MonotonicWallClock,
        timeouts: TimeoutsLoop,
        *,
        debug: bool,
        auth: Auth | None = None,
        push_allow: PushAllowList | None = None,
        metrics: ServerMetrics | None = None,
    ) -> None:
        self._service = service
        self._spans = _request_spans()
        self._metrics = metrics
        self._push_allow = push_allow
        self._auth = auth
        self._clock = clock
        self._timeouts = timeouts
        self._debug = debug

    async def __call__(
        self, body: bytes, bearer: str | None = None, headers: Iterable[tuple[bytes, bytes]] = ()
    ) -> tuple[int, bytes]:
        """The HTTP status and the response body for one request body; ``bearer`` is the
        token of its ``Authorization`` header, used when ``head.auth`` carries none;
        ``headers`` are its HTTP headers, read for a trace context when tracing."""
        if self._metrics is None:
            return (await self._answer(body, bearer, headers))[1:]
        started = time.perf_counter()
        kind, status, response = await self._answer(body, bearer, headers)
        self._metrics.request(kind, status, time.perf_counter() - started)
        return status, response

    async def _answer(
        self, body: bytes, bearer: str | None, headers: Iterable[tuple[bytes, bytes]]
    ) -> tuple[str, int, bytes]:
        """The kind as sent, the HTTP status and the response body."""
        try:
            envelope = decode_envelope(body)
            grant = None
            if self._auth is not None:
                # Before the kind is looked up, as in the reference: a caller without a
                # token learns nothing, not even which kinds exist.
                grant = self._auth.authenticate(envelope.auth or bearer)
                grant.admit_kind(envelope.kind)
            admit = None if grant is None else grant.admit
            request = decode_data(envelope, admit)
            serving(request)  # the lines logged from here on carry its ids
        except BadRequest as e:
            return e.kind, e.status, encode_response(e.kind, e.corr_id, e.reply())
        except Denied as e:
            reply = Reply(e.status, e.message)
            return envelope.kind, e.status, encode_response(envelope.kind, envelope.corr_id, reply)
        run = self._run_debug if request.kind.debug else self._run
        if self._spans is None:
            reply = await run(request)
        else:
            reply = await self._spans.traced(request, run, headers)
        if grant is not None:
            reply = grant.limit(reply)
        try:
            return request.kind, reply.status, encode_response(request.kind, request.corr_id, reply)
        except Exception:  # a reply the encoder cannot write is our bug, not the client's
            reply = _internal(f"encoding the {request.kind} reply")
            return request.kind, 500, encode_response(request.kind, request.corr_id, reply)

    async def _run(self, request: Request) -> Reply:
        if self._push_allow is not None:
            # A push target refused at the door is a 400 the client sees, not a message
            # parked later with only a warning in the server's log.
            refusal = door_refusal(request.data, self._push_allow)
            if refusal is not None:
                return Reply(400, refusal)
        if self._debug and request.debug_time is not None:
            now = request.debug_time
        else:
            now = self._clock.now()
        try:
            reply = await self._service.handle(request, now)
        except Retriable as e:
            # Nothing was committed; the client may send the same request again.
            error = _error_id()
            log.warning("%s lost its retries [error %s]: %s", request.kind, error, e)
            return Reply(503, f"Temporarily unavailable, retry (error {error})")
        except Exception:
            return _internal(request.kind)
        if request.kind not in READ_ONLY:
            # The commit may have armed a deadline earlier than the one the loop sleeps towards.
            self._timeouts.poke()
        return reply

    async def _run_debug(self, request: Request) -> Reply:
        if not self._debug:
            return Reply(403, "Debug operations are disabled")
        kind = request.kind
        try:
            if kind == Kind.DEBUG_START:
                self._timeouts.pause()
            elif kind == Kind.DEBUG_STOP:
                self._timeouts.resume()
            elif kind == Kind.DEBUG_RESET:
                await self._service.reset()
            elif kind == Kind.DEBUG_SNAP:
                return Reply(200, await self._service.snapshot())
            elif kind == Kind.DEBUG_TICK:
                assert isinstance(request.data, DebugTickRequest)
                time = request.data.time
                if request.debug_time is not None and request.debug_time != time:
                    return Reply(400, "resonate:debug_time must equal data.time")
                await self._service.fire_due(time)
                return Reply(200, [])
        except Exception:
            verb = {Kind.DEBUG_RESET: "Reset", Kind.DEBUG_SNAP: "Snap", Kind.DEBUG_TICK: "Tick"}
            return _internal(kind, f"{verb.get(kind, 'Debug')} failed")
        return Reply(200, EMPTY)


def _request_spans() -> RequestSpans | None:
    """A span per request when OpenTelemetry is installed (the otel extra) and a tracer
    provider configured; decided once, so a server without them pays one None check."""
    try:
        from troth.server.otel import request_spans
    except ImportError:
        return None
    return request_spans()


def _error_id() -> str:
    return secrets.token_hex(6)


def _internal(what: str, message: str = "Internal error") -> Reply:
    """The 500 for the exception being handled. Its text can show SQL, stored data and file
    paths, so it goes to the log only, under an id the body names for finding it there."""
    error = _error_id()
    log.exception("%s failed [error %s]", what, error)
    return Reply(500, f"{message} (error {error}: see the server log)")
