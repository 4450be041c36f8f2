"""What an app observes itself with, decided once per app: its tracing and its metrics.

**Tracing** (``troth.sdk.tracing`` for the spans, ``troth.sdk.otel`` makes them): an app
traces when it is given a tracer (``Troth(tracer=...)``) or, without one, when a global
tracer provider is configured by the time its runtime is made (its ``start``, its first
``run`` or ``rpc``, or any other request it sends). Otherwise it gets ``UNTRACED``, whose
hooks do nothing, and OpenTelemetry (the optional ``otel`` extra) is never imported: the
choice is made once per app, not per call, so tracing off costs a no-op call at each hook
(bench/tracing.py).

**Metrics** (``troth.sdk.metrics``): an app given a Prometheus registry
(``Troth(metrics=...)``) counts into it; otherwise it gets ``UNMEASURED``, and
prometheus-client is never imported.

This module is the only one that knows both the hooks and their implementations, so each
interface module stays free of its optional dependency.
"""

from __future__ import annotations

from typing import Any

from troth.sdk.metrics import UNMEASURED, Metrics, PrometheusMetrics
from troth.sdk.tracing import UNTRACED, Tracing


def choose(tracer: Any = None) -> Tracing:
    """The app's tracing: ``tracer``'s, else the global tracer provider's when one is
    configured, else ``UNTRACED``."""
    if tracer is None:
        try:
            from opentelemetry import trace
        except ImportError:  # the otel extra is not installed
            return UNTRACED
        provider = trace.get_tracer_provider()
        if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
            return UNTRACED  # nothing configured: spans would go nowhere
        tracer = provider.get_tracer("troth.sdk")
    # Imported here, not above: it imports OpenTelemetry, which an untraced app never loads.
    from troth.sdk.otel import OtelTracing

    return OtelTracing(tracer)


def measure(registry: Any = None) -> Metrics:
    """The app's metrics: counted into ``registry`` when given, else ``UNMEASURED``."""
    return UNMEASURED if registry is None else PrometheusMetrics(registry)
