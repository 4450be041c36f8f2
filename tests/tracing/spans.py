"""Spans of other processes, for the tests to read: each process that runs with
``TROTH_TEST_SPANS`` set (a folder) writes every span it starts and ends, as JSON lines, to
a file of its own there; ``site/sitecustomize.py`` installs the recorder at startup.

Starts are written too, so that a process killed with SIGKILL leaves the spans it had open:
a killed worker's run has no end, but its start is part of the trace.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider

SITE = Path(__file__).parent / "site"
ROOT = Path(__file__).resolve().parents[2]


def traced_env(folder: Path, role: str) -> dict[str, str]:
    """The environment of a process whose spans go to ``folder``, labeled ``role``."""
    return {
        "TROTH_TEST_SPANS": str(folder),
        "TROTH_TEST_ROLE": role,
        "PYTHONPATH": os.pathsep.join([str(SITE), str(ROOT)]),
    }


class JsonLines(SpanProcessor):
    def __init__(self, path: Path, role: str) -> None:
        self._path = path
        self._role = role

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self._write("start", span)

    def on_end(self, span: ReadableSpan) -> None:
        self._write("end", span)

    def _write(self, event: str, span: ReadableSpan) -> None:
        line = {"event": event, "role": self._role, "pid": os.getpid(), **as_dict(span)}
        with self._path.open("a") as f:
            f.write(json.dumps(line) + "\n")


def install() -> None:
    """Make the recorder this process's global tracer provider."""
    folder = Path(os.environ["TROTH_TEST_SPANS"])
    role = os.environ.get("TROTH_TEST_ROLE", "process")
    provider = TracerProvider()
    provider.add_span_processor(JsonLines(folder / f"{role}-{os.getpid()}.jsonl", role))
    trace.set_tracer_provider(provider)


def as_dict(span: ReadableSpan) -> dict[str, Any]:
    context = span.get_span_context()
    assert context is not None
    return {
        "name": span.name,
        "trace": f"{context.trace_id:032x}",
        "span": f"{context.span_id:016x}",
        "parent": f"{span.parent.span_id:016x}" if span.parent is not None else None,
        "attributes": dict(span.attributes or {}),
        "events": [{"name": e.name, **dict(e.attributes or {})} for e in span.events],
        "status": span.status.status_code.name,
    }


def read(folder: Path) -> list[dict[str, Any]]:
    """Every span the processes wrote, once each: its end if it ended, else its start."""
    spans: dict[str, dict[str, Any]] = {}
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            span = json.loads(line)
            if span["event"] == "end" or span["span"] not in spans:
                spans[span["span"]] = span
    return list(spans.values())
