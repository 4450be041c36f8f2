"""A span per request, made with OpenTelemetry (imported only when it is installed: the
otel extra; ``troth.server.rpc`` asks ``request_spans`` once, at startup).

The server traces when a global tracer provider is configured in its process, as
``opentelemetry-instrument troth serve`` configures one from the ``OTEL_*`` environment
(docs/tracing.md). A request that creates a promise whose ``param.headers`` carry a trace
context (``traceparent``: the SDKs put the span of the rpc that creates an execution there)
is a child of that span, so the caller's trace shows what the server did for it. Any
other request sent from inside a span of a traced troth SDK carries that span's context in
its HTTP headers (``traceparent``), and its span joins the trace the same way.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable

from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer
from opentelemetry.util.types import Attributes

from troth.protocol.conventions import TRACEPARENT
from troth.protocol.envelope import Request
from troth.protocol.requests import (
    Data,
    PromiseCreateRequest,
    TaskCreateRequest,
    TaskFenceRequest,
    TaskFencesRequest,
    TaskHeartbeatRequest,
    TaskSuspendRequest,
)
from troth.protocol.responses import Reply
from troth.protocol.subjects import PROMISE_ID, SCHEDULE_ID, TASK_ID, subject_ids

KIND = "troth.kind"
ID = "troth.id"  # the promise, task or schedule the request is about
STATUS = "troth.status"
# The callbacks of a task.suspend, the fences of a task.fences, the tasks of a heartbeat.
BATCH = "troth.batch_size"

_CONTEXT_HEADERS = {b"traceparent", b"tracestate"}  # the W3C trace context, as ASGI names it


def request_spans() -> RequestSpans | None:
    """Spans for the configured tracer provider; None when none is configured."""
    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return None
    return RequestSpans(provider.get_tracer("troth.server"))


class RequestSpans:
    def __init__(self, tracer: Tracer) -> None:
        self._tracer = tracer

    async def traced(
        self,
        request: Request,
        run: Callable[[Request], Awaitable[Reply]],
        headers: Iterable[tuple[bytes, bytes]],
    ) -> Reply:
        """``run(request)`` inside the request's span, whose parent is the trace context of
        the promise it creates, else that of its HTTP ``headers`` (the SDK sends the span
        it makes the request in), else none."""
        data = request.data
        attributes: Attributes = {KIND: request.kind.value, **_about(data)}
        created = _created(data)
        carrier = created.param.headers if created is not None else None
        if not carrier or TRACEPARENT not in carrier:
            carrier = {
                name.decode("latin-1"): value.decode("latin-1")
                for name, value in headers
                if name in _CONTEXT_HEADERS
            }
        parent = propagate.extract(carrier) if carrier else None
        with self._tracer.start_as_current_span(
            request.kind.value, parent, SpanKind.SERVER, attributes
        ) as span:
            reply = await run(request)
            span.set_attribute(STATUS, reply.status)
            if reply.status >= 500:
                span.set_status(Status(StatusCode.ERROR, str(reply.body)))
            return reply


def _created(data: Data) -> PromiseCreateRequest | None:
    """The promise a request creates, if it creates one."""
    if isinstance(data, PromiseCreateRequest):
        return data
    if isinstance(data, TaskCreateRequest):
        return data.action.data
    if isinstance(data, TaskFenceRequest) and isinstance(data.action.data, PromiseCreateRequest):
        return data.action.data
    if isinstance(data, TaskFencesRequest):
        # The first promise a batch creates, as if its fences had come one by one.
        for action in data.actions:
            if isinstance(action.data, PromiseCreateRequest):
                return action.data
    return None


def _about(data: Data) -> dict[str, str | int]:
    """The id the request is about (a promise's before a task's: a fence's action, not its
    task), as the log lines name it (``troth.protocol.subjects``), and its batch size where
    it carries a batch."""
    batch: dict[str, str | int] = {}
    if isinstance(data, TaskSuspendRequest | TaskFencesRequest):
        batch = {BATCH: len(data.actions)}
    elif isinstance(data, TaskHeartbeatRequest):
        batch = {BATCH: len(data.tasks)}
    ids = subject_ids(data)
    id = ids.get(PROMISE_ID) or ids.get(TASK_ID) or ids.get(SCHEDULE_ID)
    return {ID: id, **batch} if id is not None else batch
