"""The queue gauges of ``GET /metrics`` on a real ``troth serve``: running, waiting and a
rate holding the line back, per queue and per busiest key (docs/metrics.md)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.server.test_metrics import scrape, value
from tests.support.servers import serve
from troth import Troth
from troth.protocol.kinds import Kind
from troth.protocol.queues import QueueSetRequest, QueueSpec, Rate

pytestmark = pytest.mark.slow  # a troth serve process


async def fill(url: str) -> None:
    """Queue ``llm`` admits one start a minute: acme-1 is offered, the rest wait."""
    app = Troth(url=url)
    try:
        spec = QueueSpec("llm", rate=Rate(1, 60_000))
        assert (await app.runtime.network.send(Kind.QUEUE_SET, QueueSetRequest(spec))).status == 200
        await app.runtime.network.send(Kind.QUEUE_SET, QueueSetRequest(QueueSpec("idle")))
        for id, key in (("acme-1", "acme"), ("acme-2", "acme"), ("globex-1", "globex")):
            tags = {"resonate:target": "poll://any@nobody", "troth:queue": "llm",
                    "troth:queue-key": key}  # fmt: skip
            await app.promises.create(id, timeout=3600, tags=tags)
    finally:
        await app.stop()


def test_queues_and_their_busiest_keys_are_gauges(tmp_path: Path) -> None:
    with serve("sqlite", tmp_path) as server:
        empty = scrape(server)
        assert not [name for name, _ in empty if name.startswith("troth_queue")]
        asyncio.run(fill(server.url))
        samples = scrape(server)
    assert value(samples, "troth_queue_running", queue="llm") == 1
    assert value(samples, "troth_queue_waiting", queue="llm") == 2
    assert value(samples, "troth_queue_rate_limited", queue="llm") == 1
    assert ("troth_queue_running", frozenset({("queue", "idle")})) in samples
    assert value(samples, "troth_queue_rate_limited", queue="idle") == 0
    assert value(samples, "troth_queue_key_running", queue="llm", key="acme") == 1
    assert value(samples, "troth_queue_key_waiting", queue="llm", key="acme") == 1
    assert value(samples, "troth_queue_key_waiting", queue="llm", key="globex") == 1
