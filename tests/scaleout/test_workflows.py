"""The scale-out test: three servers on one database, worker processes spread over them,
1,000 workflows that fan out and sleep; then the same with one server ``kill -9``ed mid-run.

Failover is the SDK's own: every process is given all three URLs, starting with a different
one (``Troth(url=[...])`` moves on to the next URL when a request or the stream fails), so
no proxy stands between the processes and the servers. ``TROTH_SCALEOUT_WORKFLOWS`` changes
how many workflows run (default 1000). Run with ``-s`` to see the timings.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable

import pytest

from tests.scaleout._cluster import Cluster
from tests.scaleout.flow import GROUP, expected
from troth import Troth

# Slow: a thousand workflows on three servers and three workers, about a minute each.
pytestmark = pytest.mark.slow

WORKFLOWS = int(os.environ.get("TROTH_SCALEOUT_WORKFLOWS", "1000"))
WORKERS = 3
DEADLINE = 480.0  # seconds for the whole run; a measured run takes about 45 (see the README)


async def run_workflows(
    urls: list[str], n: int, at_first_result: Callable[[], None] = lambda: None
) -> dict[int, int]:
    """Start ``n`` workflows through an SDK client and wait for all their results.

    Results come late and close together (every workflow fans out, then sleeps), so when
    the first arrives nearly all the others are in flight: ``at_first_result`` runs then.
    """
    results: dict[int, int] = {}
    started = time.monotonic()
    async with Troth(url=urls, group="clients") as client:
        handles = [client.options(target=GROUP).rpc(f"wf-{i}", "workflow", i) for i in range(n)]

        async def result(i: int) -> None:
            results[i] = await handles[i].result()
            if len(results) in (1, n // 2, n):
                print(f"{len(results)}/{n} workflows done after {time.monotonic() - started:.1f} s")
            if len(results) == 1:
                await asyncio.to_thread(at_first_result)

        async with asyncio.timeout(DEADLINE):
            await asyncio.gather(*(result(i) for i in range(n)))
    return results


def start(make_cluster: Callable[..., Cluster]) -> Cluster:
    cluster = make_cluster(3)
    for i in range(WORKERS):
        cluster.start_worker(first=i % len(cluster.servers))
    return cluster


def check(cluster: Cluster, results: dict[int, int], survivors: int) -> None:
    assert results == {i: expected(i) for i in range(WORKFLOWS)}
    alive = [
        server.process is not None and server.process.poll() is None for server in cluster.servers
    ]
    assert sum(alive) == survivors
    assert all(worker.poll() is None for worker in cluster.workers), cluster.logs()


def test_a_thousand_workflows_complete_on_three_servers(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = start(make_cluster)
    results = asyncio.run(run_workflows(cluster.urls(0), WORKFLOWS))
    check(cluster, results, survivors=3)


def test_a_thousand_workflows_complete_when_a_server_is_killed_mid_run(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = start(make_cluster)
    # The client and worker 0 start on server 0, the one that dies; they must fail over.
    doomed = cluster.servers[0]
    results = asyncio.run(run_workflows(cluster.urls(0), WORKFLOWS, doomed.kill))
    assert doomed.process is not None and doomed.process.returncode == -9
    check(cluster, results, survivors=2)
