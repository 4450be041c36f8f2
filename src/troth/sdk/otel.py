"""The SDK's spans, made with OpenTelemetry (imported only by an app that traces; see
``troth.sdk.tracing`` for which spans and why)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import msgspec
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer
from opentelemetry.util.types import Attributes

from troth.protocol.conventions import STEP_TAG, TRACEPARENT
from troth.protocol.records import PromiseRecord, Value
from troth.protocol.requests import PromiseCreateRequest
from troth.sdk.errors import ExecutionSignal
from troth.sdk.tracing import Rpc, Run, Tracing

# Span attributes.
ID = "troth.id"  # the promise (execution or step) the span is about
FUNCTION = "troth.function"
VERSION = "troth.task.version"
ATTEMPT = "troth.attempt"
STEP = "troth.step"  # the call as the replay check names it: run:charge, now, ...
REPLAYED = "troth.replayed"  # the call met its record: no new work was done
OUTCOME = "troth.outcome"  # how a run ended; why a step attempt ended without a result


class OtelTracing(Tracing):
    traced = True

    def __init__(self, tracer: Tracer) -> None:
        self._tracer = tracer

    def context(self) -> dict[str, str]:
        headers: dict[str, str] = {}
        propagate.inject(headers)
        return headers

    @contextlib.contextmanager
    def execution(
        self, root: PromiseRecord, name: str, version: int, attempt: int
    ) -> Iterator[Run]:
        # The parent is the span that created the execution, whichever process that was;
        # a root without trace context starts a trace of its own.
        parent = propagate.extract(root.param.headers or {})
        attributes: Attributes = {ID: root.id, FUNCTION: name, VERSION: version, ATTEMPT: attempt}
        with self._tracer.start_as_current_span(
            f"execute {name}", parent, SpanKind.CONSUMER, attributes
        ) as span:
            yield _TracedRun(span)

    @contextlib.contextmanager
    def step(self, id: str, step: str, attempt: int) -> Iterator[None]:
        attributes: Attributes = {ID: id, STEP: step, ATTEMPT: attempt}
        with self._tracer.start_as_current_span(
            f"step {step}", attributes=attributes, record_exception=False,
            set_status_on_exception=False,
        ) as span:  # fmt: skip
            try:
                yield
            except ExecutionSignal as signal:  # a durable step suspended, or the run stops
                span.set_attribute(OUTCOME, type(signal).__name__)
                raise
            except Exception as error:  # the attempt failed
                span.record_exception(error)
                span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
                raise

    def replayed(self, record: PromiseRecord) -> None:
        step = record.tags.get(STEP_TAG, "")
        trace.get_current_span().add_event(REPLAYED, {ID: record.id, STEP: step})

    @contextlib.contextmanager
    def rpc(self, kind: str, name: str, request: PromiseCreateRequest) -> Iterator[Rpc]:
        attributes = {ID: request.id, FUNCTION: name}
        with self._tracer.start_as_current_span(
            f"{kind} {name}", kind=SpanKind.PRODUCER, attributes=attributes
        ) as span:
            headers = dict(request.param.headers or {})
            propagate.inject(headers)
            param = Value(headers=headers, data=request.param.data)
            yield _TracedRpc(msgspec.structs.replace(request, param=param), span)


class _TracedRun(Run):
    def __init__(self, span: trace.Span) -> None:
        self._span = span

    def ended(self, outcome: object) -> None:
        # done, failed (the function raised), suspend, abort (the run could not go on:
        # a lost lease, a stop, a refused replay), rerun.
        self._span.set_attribute(OUTCOME, type(outcome).__name__.lower())
        error = getattr(outcome, "error", None) or getattr(outcome, "signal", None)
        if isinstance(error, BaseException):
            self._span.record_exception(error)
            self._span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))


class _TracedRpc(Rpc):
    def __init__(self, request: PromiseCreateRequest, span: trace.Span) -> None:
        super().__init__(request)
        self._span = span

    def answered(self, record: PromiseRecord) -> None:
        # A promise made by an earlier run carries that run's trace context, not ours.
        ours = (self.request.param.headers or {}).get(TRACEPARENT)
        if (record.param.headers or {}).get(TRACEPARENT) != ours:
            self._span.set_attribute(REPLAYED, True)
