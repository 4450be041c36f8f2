"""Where the SDK's OpenTelemetry spans begin and end: the hooks, and ``UNTRACED``.

An app traces when it is given a tracer or a global tracer provider is configured
(``troth.sdk.observability.choose``, once per app); otherwise it gets ``UNTRACED``, whose
hooks do nothing, and OpenTelemetry (the optional ``otel`` extra) is never imported.

The spans (``troth.sdk.otel`` makes them; docs/tracing.md shows a trace):

- an **rpc** span for each execution started (``app.run``, ``app.rpc``, ``ctx.rpc``,
  ``ctx.detached``), around the request that creates it; its trace context travels in the
  promise's ``param.headers`` (``traceparent``, ``tracestate``), as the Resonate TypeScript
  SDK's OpenTelemetry package carries it, so the server and whichever worker runs the
  execution, in any language, join the caller's trace;
- an **execution** span for each run of an execution on a worker, a child of the rpc span
  read from the root promise's headers: every run (after a crash, a suspension, a retry)
  is a span of the same trace;
- a **step** span for each attempt of a local step. A step answered from its record (a
  replay) makes no span: it is an event on the run's span (``troth.replayed``), and an rpc
  whose promise already existed is marked ``troth.replayed``.

Every request the SDK sends over HTTP from inside one of these spans carries its context
as HTTP headers too (``Tracing.context``), so the server's span of it joins the trace.
"""

from __future__ import annotations

import contextlib

from troth.protocol.records import PromiseRecord
from troth.protocol.requests import PromiseCreateRequest

_NOTHING = contextlib.nullcontext()  # reusable: the no-op hooks allocate nothing


class Tracing:
    """The hooks, as ``UNTRACED`` answers them: nothing is recorded."""

    traced = False

    def context(self) -> dict[str, str]:
        """The current span's trace context as W3C headers (``traceparent``), sent with
        each request so that the server's span of it joins the trace."""
        return {}

    def execution(
        self, root: PromiseRecord, name: str, version: int, attempt: int
    ) -> contextlib.AbstractContextManager[Run]:
        """Around one run of execution ``root`` (function ``name``, held at task
        ``version``, making its ``attempt``-th attempt)."""
        return _NO_RUN

    def step(self, id: str, step: str, attempt: int) -> contextlib.AbstractContextManager[None]:
        """Around one attempt of the local step ``id`` (``step`` as the replay check names
        it: ``run:charge``)."""
        return _NOTHING

    def replayed(self, record: PromiseRecord) -> None:
        """The call of ``record`` was answered from its settled record: no new work."""

    def rpc(
        self, kind: str, name: str, request: PromiseCreateRequest
    ) -> contextlib.AbstractContextManager[Rpc]:
        """Around the request that creates an execution of function ``name`` (``kind``:
        run, rpc, detached)."""
        return contextlib.nullcontext(Rpc(request))


class Run:
    """A run of an execution: ``ended`` tells its span how the run ended."""

    def ended(self, outcome: object) -> None:
        """``outcome``: the run's ``troth.sdk.execution.Outcome`` (``Done``, ``Failed``,
        ``Suspend``, ``Abort``, ``Rerun``)."""


class Rpc:
    """An execution being created: the request to send (carrying the trace context when
    traced), and ``answered`` to tell the span which promise the server answered with."""

    def __init__(self, request: PromiseCreateRequest) -> None:
        self.request = request

    def answered(self, record: PromiseRecord) -> None:
        pass


_NO_RUN = contextlib.nullcontext(Run())

UNTRACED = Tracing()
