"""The server's Prometheus metrics: what ``GET /metrics`` answers (docs/metrics.md).

Each server has a registry of its own, so several servers in one process (the tests run
some in-process) never share a counter. The counters of the reference server keep its names
and labels (``resonate_*``), so its dashboards work on troth; the rest are troth's own
(``troth_*``).

Two kinds of value:

- events, counted where they happen: requests, messages, pushes, commits. These sit on the
  hot path, so each site costs a dictionary lookup and an increment (the label children are
  cached here), and a server started with ``--no-metrics`` has no ``ServerMetrics`` at all:
  every site is one ``is None`` test;
- levels, read when scraped (``refresh``): the outbox's depth and oldest message, the
  timeouts lag, halted tasks, poll connections per group, the PostgreSQL pool. A scrape
  costs one short storage read; no request pays for them;
- queues, read when scraped through the storage's own ``queue.search`` and ``queue.get``
  (``_Queues``): each queue's running, waiting and rate, and per key only the busiest keys
  a ``queue.get`` lists, so a queue with a million keys still makes a bounded scrape.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from troth.protocol.envelope import Request
from troth.protocol.kinds import Kind
from troth.protocol.queues import (
    QueueGetRequest,
    QueueRecord,
    QueueResponse,
    QueueSearchRequest,
    QueueSearchResponse,
)
from troth.storage.service import Admin, Requests, StorageStats, Timers

# The text format every Prometheus reads (the client's newest, 1.0.0, only Prometheus 3 does);
# troth's names are all legacy ones, so the text is the same.
CONTENT_TYPE = b"text/plain; version=0.0.4; charset=utf-8"

_KINDS = frozenset(kind.value for kind in Kind)
# A batch of group commit holds up to 512 jobs (troth.storage.sqlite.writer).
_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
_COMMIT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class ServerMetrics:
    """The counters the server's parts report to, and the levels read at each scrape.

    ``backend`` labels the commit metrics (``sqlite`` or ``postgres``); ``now`` is the
    server's clock (ms), against which the timeouts lag and the outbox's age are measured.
    """

    def __init__(self, *, backend: str, now: Callable[[], int]) -> None:
        self.registry = CollectorRegistry()
        registry = self.registry
        self._now = now
        self._requests = Counter(
            "resonate_request_total",
            "Requests answered, by kind and status (an unknown kind is counted as 'invalid')",
            ["kind", "status"],
            registry=registry,
        )
        self._duration = Histogram(
            "resonate_request_duration_seconds",
            "Time to answer a request, from its body read to its response encoded",
            ["kind"],
            registry=registry,
        )
        self._messages = Counter(
            "resonate_messages_total",
            "Outbox messages handed to a transport, by message kind",
            ["kind"],
            registry=registry,
        )
        self._deliveries = Counter(
            "resonate_deliveries_total",
            "HTTP push rounds by result (success, error) and undeliverable messages (dropped)",
            ["status"],
            registry=registry,
        )
        self._scheduled = Counter(
            "resonate_schedule_promises_total",
            "Promises created by schedules",
            registry=registry,
        )
        self._transport = Counter(
            "troth_messages_total",
            "Outbox messages by transport (poll, push; none for an unknown scheme) and event:"
            " enqueued (handed to the transport), delivered, failed (a try that did not"
            " deliver; it is tried again), dropped (undeliverable)",
            ["transport", "event"],
            registry=registry,
        )
        self._push_attempts = Counter(
            "troth_push_attempts_total", "HTTP push requests made", registry=registry
        )
        self._push_failures = Counter(
            "troth_push_failures_total",
            "HTTP push requests that failed (no 2xx answer: refused, timed out, other status)",
            registry=registry,
        )
        self._batch = Histogram(
            "troth_storage_commit_requests",
            "Requests per committed write transaction (SQLite's group commit; 1 on PostgreSQL)",
            ["backend"],
            buckets=_BATCH_BUCKETS,
            registry=registry,
        )
        self._commit = Histogram(
            "troth_storage_commit_seconds",
            "Time of a write transaction, from its start to the durable commit",
            ["backend"],
            buckets=_COMMIT_BUCKETS,
            registry=registry,
        )
        self._batch_child = self._batch.labels(backend)
        self._commit_child = self._commit.labels(backend)
        # A child per label values, made once: prometheus-client's ``labels`` validates and
        # locks on every call, several times the cost of the count itself.
        self._request = functools.cache(self._requests.labels)
        self._latency = functools.cache(self._duration.labels)
        self._by_transport = functools.cache(self._transport.labels)
        self._by_kind = functools.cache(self._messages.labels)
        self._rounds = functools.cache(self._deliveries.labels)
        self._levels = _Levels()
        registry.register(self._levels)
        self._queues = _Queues()
        registry.register(self._queues)

    # -- events -----------------------------------------------------------------------------

    def request(self, kind: str, status: int, seconds: float) -> None:
        if kind not in _KINDS:
            kind = "invalid"  # a client's string: never a label of its own
        self._request(kind, status).inc()
        self._latency(kind).observe(seconds)

    def message(self, transport: str, event: str, kind: str | None = None) -> None:
        """An outbox message's ``event`` on ``transport``; ``kind`` when it was enqueued."""
        self._by_transport(transport, event).inc()
        if kind is not None:
            self._by_kind(kind).inc()

    def push_round(self, delivered: bool) -> None:
        """A round of push attempts ended; a delivered message is counted by the loop."""
        self._rounds("success" if delivered else "error").inc()
        if not delivered:
            self.message("push", "failed")

    def dropped(self) -> None:
        self._rounds("dropped").inc()
        self.message("none", "dropped")

    def push_attempt(self, failed: bool) -> None:
        self._push_attempts.inc()
        if failed:
            self._push_failures.inc()

    # The storage's events (``troth.storage.service.StorageEvents``).

    def committed(self, requests: int, seconds: float) -> None:
        self._batch_child.observe(requests)
        self._commit_child.observe(seconds)

    def scheduled(self, promises: int) -> None:
        self._scheduled.inc(promises)

    # -- levels, read at each scrape --------------------------------------------------------

    async def scrape(
        self,
        storage: Admin,
        timers: Timers,
        poll_groups: Mapping[str, int],
        requests: Requests | None = None,
    ) -> bytes:
        """The exposition of every metric, the levels read now (and the queues, through
        ``requests``: the storage's handler of protocol requests)."""
        stats = await storage.stats()
        deadline = await timers.next_deadline()
        now = self._now()
        self._levels.update(stats, deadline, now, dict(poll_groups))
        self._queues.update(await read_queues(requests, now) if requests else [], now)
        return generate_latest(self.registry)


_QUEUE_PAGE = 100


async def read_queues(requests: Requests, now: int) -> list[QueueRecord]:
    """Every queue, each as ``queue.get`` answers it (with its busiest keys)."""
    names: list[str] = []
    cursor: str | None = None
    while True:
        search = QueueSearchRequest(limit=_QUEUE_PAGE, cursor=cursor)
        reply = await requests.handle(Request(Kind.QUEUE_SEARCH, "metrics", search), now)
        if not isinstance(reply.body, QueueSearchResponse):
            return []
        names += [queue.spec.name for queue in reply.body.queues]
        cursor = reply.body.cursor
        if cursor is None:
            break
    records = []
    for name in names:
        reply = await requests.handle(
            Request(Kind.QUEUE_GET, "metrics", QueueGetRequest(name)), now
        )
        if isinstance(reply.body, QueueResponse):  # not deleted since the search
            records.append(reply.body.queue)
    return records


class _Levels:
    """The values read at scrape time, as a collector of the registry."""

    def __init__(self) -> None:
        self._stats: StorageStats | None = None
        self._lag = 0.0
        self._poll: dict[str, int] = {}
        # The oldest outbox row, and when a scrape first saw it oldest: rows carry no time,
        # so its age counts from then (exact for a message stuck longer than a scrape
        # interval, which is what an alert wants).
        self._head: int | None = None
        self._head_since = 0
        self._age = 0.0

    def update(
        self, stats: StorageStats, deadline: int | None, now: int, poll: dict[str, int]
    ) -> None:
        self._stats = stats
        self._lag = 0.0 if deadline is None else max(0, now - deadline) / 1000
        self._poll = poll
        if stats.outbox_head != self._head:
            self._head = stats.outbox_head
            self._head_since = now
        self._age = 0.0 if self._head is None else (now - self._head_since) / 1000

    def describe(self) -> list[Metric]:
        return []  # levels come and go (the pool's only on PostgreSQL): nothing to check

    def collect(self) -> Iterator[Metric]:
        stats = self._stats
        if stats is None:
            return
        yield _gauge("troth_outbox_messages", "Undelivered outbox messages", stats.outbox_depth)
        yield _gauge(
            "troth_outbox_oldest_age_seconds",
            "How long the oldest undelivered message has been the oldest (0: outbox empty)",
            self._age,
        )
        yield _gauge(
            "troth_timeouts_lag_seconds",
            "Now minus the earliest deadline the timeouts loop has to fire, when past (0: none)",
            self._lag,
        )
        yield _gauge(
            "troth_tasks_halted",
            "Tasks halted (they run again only when resumed)",
            stats.halted_tasks,
        )
        poll = GaugeMetricFamily(
            "troth_poll_connections",
            "Open SSE (poll) connections per worker group",
            labels=["group"],
        )
        for group, count in sorted(self._poll.items()):
            poll.add_metric([group], count)
        yield poll
        pool = stats.pool
        if pool is None:
            return
        yield _gauge("troth_pg_pool_connections", "PostgreSQL connections open", pool.size)
        yield _gauge(
            "troth_pg_pool_waiting",
            "Requests waiting for a PostgreSQL connection now",
            pool.waiting,
        )
        yield CounterMetricFamily(
            "troth_pg_pool_waits",
            "Requests that waited for a PostgreSQL connection",
            value=pool.waits,
        )
        yield CounterMetricFamily(
            "troth_pg_pool_wait_seconds",
            "Time requests waited for a PostgreSQL connection",
            value=pool.wait_seconds,
        )
        yield CounterMetricFamily(
            "troth_pg_pool_timeouts",
            "Requests that gave up waiting for a PostgreSQL connection",
            value=pool.timeouts,
        )


class _Queues:
    """Each queue's gauges, and its busiest keys', as the last scrape read them. The
    families are there even with no queue, so what a server exports never depends on
    its state."""

    def __init__(self) -> None:
        self._records: list[QueueRecord] = []
        self._now = 0

    def update(self, records: list[QueueRecord], now: int) -> None:
        self._records, self._now = records, now

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        now = self._now
        families = {
            name: GaugeMetricFamily(f"troth_queue_{name}", help, labels=["queue"])
            for name, help in _QUEUE_GAUGES
        }
        keys = {
            name: GaugeMetricFamily(f"troth_queue_key_{name}", help, labels=["queue", "key"])
            for name, help in _KEY_GAUGES
        }
        for q in self._records:
            name = q.spec.name
            families["running"].add_metric([name], q.running)
            families["waiting"].add_metric([name], q.waiting)
            families["rate_limited"].add_metric([name], _holds(q.limited_until, now))
            for k in q.keys:
                keys["running"].add_metric([name, k.key], k.running)
                keys["waiting"].add_metric([name, k.key], k.waiting)
                keys["rate_limited"].add_metric([name, k.key], _holds(k.limited_until, now))
        yield from families.values()
        yield from keys.values()


_QUEUE_GAUGES = (
    ("running", "Executions of the queue holding a slot (offered to a worker or running)"),
    ("waiting", "Executions waiting in the queue's line for a slot"),
    ("rate_limited", "1 while the queue's rate holds its line back, else 0"),
)
_KEY_GAUGES = (
    ("running", "Executions of one of the queue's busiest keys holding a slot"),
    ("waiting", "Executions of one of the queue's busiest keys waiting for a slot"),
    ("rate_limited", "1 while the key's own rate holds it back, else 0"),
)


def _holds(until: int | None, now: int) -> int:
    return int(until is not None and until > now)


def _gauge(name: str, help: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, help, value=value)
