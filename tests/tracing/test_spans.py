"""The SDK's spans in one process (embedded mode on virtual time, OpenTelemetry's in-memory
exporter), and the choice of tracing (``troth.sdk.observability``): none unless a tracer
is given or configured."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from troth import Constant, Context, Never
from troth.protocol.conventions import TRACEPARENT
from troth.sdk.observability import choose
from troth.sdk.tracing import UNTRACED
from troth.testing import VirtualTroth

pytestmark = pytest.mark.anyio


def traced() -> tuple[Any, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer("test"), exporter


def named(spans: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def parent(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def test_no_tracer_and_no_configured_provider_means_no_tracing(monkeypatch):
    # This process configures no global provider: OpenTelemetry's default is a proxy.
    assert choose() is UNTRACED
    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # the otel extra not installed
    assert choose() is UNTRACED


async def test_a_workflow_is_one_trace_of_rpcs_runs_and_step_attempts():
    tracer, exporter = traced()
    app = VirtualTroth(tracer=tracer)
    tries: list[int] = []

    def flaky(n: int) -> int:
        tries.append(n)
        if len(tries) == 1:
            raise ValueError("first attempt fails")
        return n + 1

    @app.register
    async def child(ctx: Context, n: int) -> int:
        return await ctx.options(retry=Constant(interval=1)).run(flaky, n)

    @app.register
    async def parent_flow(ctx: Context, n: int) -> int:
        a = await ctx.run(abs, n)
        return await ctx.rpc(child, a)

    async with app:
        assert await app.run("p-1", parent_flow, -4).result() == 5
        root = (await app.promises.get("p-1")).record
    spans = exporter.get_finished_spans()

    (start,) = named(spans, "run parent_flow")
    assert parent(start) is None and {s.context.trace_id for s in spans} == {start.context.trace_id}
    # The root promise carries the rpc span's context, for whichever worker runs it.
    assert f"{start.context.span_id:016x}" in (root.param.headers or {})[TRACEPARENT]

    # Two runs of the parent (before and after the child), each a child of the rpc span; the
    # second replays the step and the rpc instead of making them again.
    runs = named(spans, "execute parent_flow")
    assert len(runs) == 2 and all(parent(r) == start.context.span_id for r in runs)
    assert [e.attributes["troth.step"] for e in runs[1].events] == ["run:abs", "rpc:child"]
    assert [r.attributes["troth.outcome"] for r in runs] == ["suspend", "done"]
    assert len(named(spans, "step run:abs")) == 1

    (rpc,) = named(spans, "rpc child")
    assert parent(rpc) == runs[0].context.span_id
    (child_run,) = named(spans, "execute child")
    assert parent(child_run) == rpc.context.span_id

    # Each attempt of the step is a span of the child's run; the failed one says why.
    attempts = named(spans, "step run:flaky")
    assert [a.attributes["troth.attempt"] for a in attempts] == [1, 2]
    assert all(parent(a) == child_run.context.span_id for a in attempts)
    assert [a.status.status_code for a in attempts] == [StatusCode.ERROR, StatusCode.UNSET]
    assert [e.name for e in attempts[0].events] == ["exception"]


async def test_trace_context_in_the_param_leaves_idempotency_and_other_readers_alone():
    tracer, exporter = traced()
    app = VirtualTroth(tracer=tracer)

    @app.register
    async def greet(ctx: Context, name: str) -> str:
        return f"hello {name}"

    async with app:
        assert await app.run("g-1", greet, "ada").result() == "hello ada"
        # Started again (another span, another traceparent): the same work, joined.
        assert await app.run("g-1", greet, "ada").result() == "hello ada"
        assert (await app.promises.get("g-1")).param()["args"] == ["ada"]
    starts = named(exporter.get_finished_spans(), "run greet")
    assert ["troth.replayed" in s.attributes for s in starts] == [False, True]
    assert len(named(exporter.get_finished_spans(), "execute greet")) == 1


async def test_a_run_that_fails_says_so_on_its_span():
    tracer, exporter = traced()
    app = VirtualTroth(tracer=tracer)

    @app.register(retry=Never())
    async def refuse(ctx: Context, reason: str) -> None:
        raise PermissionError(reason)

    async with app:
        with pytest.raises(PermissionError):
            await app.run("r-1", refuse, "no").result()
    (run,) = named(exporter.get_finished_spans(), "execute refuse")
    assert run.attributes["troth.outcome"] == "failed"
    assert run.status.status_code == StatusCode.ERROR
    assert run.status.description == "PermissionError: no"
