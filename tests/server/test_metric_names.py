"""The Grafana dashboard queries only metrics the server exports, and docs/metrics.md names
every one of them."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from troth.server.metrics import ServerMetrics
from troth.storage.service import PoolStats, StorageStats

DOCS = Path(__file__).resolve().parents[2] / "docs"
NAME = re.compile(r"\b(?:resonate|troth)_[a-z_]+\b")
SERIES = {
    "counter": ("_total",),
    "histogram": ("_bucket", "_sum", "_count"),
    "gauge": ("",),
}


class PostgresLevels:
    """What a PostgreSQL backend answers a scrape (its pool's metrics appear only then)."""

    backend = "postgres"

    async def stats(self) -> StorageStats:
        return StorageStats(3, 17, 1, PoolStats(size=4, waiting=1, waits=9, wait_seconds=0.5,
                                               timeouts=2))  # fmt: skip

    async def next_deadline(self) -> int | None:
        return 1_000


def exported() -> dict[str, str]:
    """Each metric's family name and type, as one scrape of a server with every level."""
    metrics = ServerMetrics(backend="postgres", now=lambda: 5_000)
    storage = PostgresLevels()
    text = asyncio.run(metrics.scrape(storage, storage, {"g": 2})).decode()  # type: ignore[arg-type]
    return {
        family.name: family.type
        for family in text_string_to_metric_families(text)
        # The client's creation time of each counter and histogram, read as gauges of their
        # own by this parser: nothing to graph.
        if not family.name.endswith("_created")
    }


def series_names() -> set[str]:
    return {name + suffix for name, kind in exported().items() for suffix in SERIES[kind]}


def test_every_dashboard_query_names_an_exported_metric() -> None:
    dashboard = json.loads((DOCS / "grafana-dashboard.json").read_text())
    queries = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    queries += [v["definition"] for v in dashboard["templating"]["list"] if "definition" in v]
    named = {name for query in queries for name in NAME.findall(query)}
    assert len(named) >= 15  # the extraction works
    assert named - series_names() == set()
    # ... and the dashboard leaves none of them out.
    assert {n for n in exported()} - {
        re.sub(r"_(total|bucket|sum|count)$", "", n) for n in named
    } == set()


def test_the_metrics_page_names_every_metric() -> None:
    page = (DOCS / "metrics.md").read_text()
    documented = set(re.findall(r"^\| `((?:resonate|troth)_[a-z_]+)` \|", page, re.MULTILINE))
    shown = {name + SERIES[kind][0] if kind == "counter" else name
             for name, kind in exported().items()}  # fmt: skip
    assert documented == shown
