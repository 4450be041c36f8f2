"""Three ``troth serve`` processes on one PostgreSQL database: every message reaches a worker
connected to any of them, promptly and once; every due timeout fires once."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator

import pytest

from tests.scaleout._cluster import Cluster
from tests.support.push import PushTarget
from tests.support.servers import TrothServer, now_ms
from tests.support.sse import SseClient
from tests.support.waiting import eventually

# Executes are not re-sent during a test (the SSE clients here never acquire), and a pass
# runs only when something wakes it: a message that arrives promptly came by NOTIFY.
QUIET = ("--debug", "--tasks-retry-timeout", "600000", "--delivery-interval", "10000")
# Well before the 10 s pass, with room for three servers and PostgreSQL loading 2 cores.
PROMPTLY = 4.0  # s


@pytest.fixture
def sse() -> Iterator[Callable[[TrothServer, str, str], SseClient]]:
    clients: list[SseClient] = []

    def connect(server: TrothServer, group: str, id: str) -> SseClient:
        client = SseClient(server.port, group, id)
        assert client.status == 200
        clients.append(client)
        return client

    yield connect
    for client in clients:
        client.close()


def task_of(message: dict) -> str:
    assert message["kind"] == "execute", message
    return message["data"]["task"]["id"]


def test_a_message_enqueued_through_one_server_reaches_a_worker_on_another_promptly(
    make_cluster: Callable[..., Cluster], sse: Callable[[TrothServer, str, str], SseClient]
) -> None:
    a, b, c = make_cluster(3, QUIET).servers
    worker = sse(c, "g", "w1")
    bystander = sse(b, "other", "w2")
    for i in range(5):
        started = time.monotonic()
        a.create_promise(f"p{i}", tags={"resonate:target": "poll://any@g"})
        assert task_of(worker.message(timeout=5)) == f"p{i}"
        assert time.monotonic() - started < PROMPTLY
    bystander.no_message(0.3)
    worker.no_message(0.5)
    eventually(lambda: a.snap()["messages"] == [])


def test_a_unicast_unblock_reaches_the_named_worker_on_another_server(
    make_cluster: Callable[..., Cluster], sse: Callable[[TrothServer, str, str], SseClient]
) -> None:
    a, b, c = make_cluster(3, QUIET).servers
    named = sse(c, "g", "w1")
    sibling = sse(a, "g", "w2")
    b.create_promise("p")
    b.ok("promise.register_listener", {"awaited": "p", "address": "poll://uni@g/w1"})
    started = time.monotonic()
    a.ok("promise.settle", {"id": "p", "state": "resolved"})
    message = named.message(timeout=5)
    assert time.monotonic() - started < PROMPTLY
    assert message["kind"] == "unblock" and message["data"]["promise"]["id"] == "p"
    sibling.no_message(0.5)
    named.no_message(0.1)


def test_each_message_goes_to_one_worker_when_every_server_has_one(
    make_cluster: Callable[..., Cluster], sse: Callable[[TrothServer, str, str], SseClient]
) -> None:
    servers = make_cluster(3, QUIET).servers
    workers = [sse(server, "g", f"w{i}") for i, server in enumerate(servers)]
    ids = [f"p{i}" for i in range(60)]
    for i, id in enumerate(ids):
        servers[i % 3].create_promise(id, tags={"resonate:target": "poll://any@g"})
    received: Counter[str] = Counter()
    for worker in workers:
        while True:
            try:
                received[task_of(worker.message(timeout=1.5))] += 1
            except TimeoutError:
                break
    assert received == Counter(ids)
    eventually(lambda: servers[0].snap()["messages"] == [])


def test_each_message_to_a_push_target_is_pushed_by_one_server(
    make_cluster: Callable[..., Cluster], push_target: PushTarget
) -> None:
    servers = make_cluster(3, QUIET).servers
    ids = [f"p{i}" for i in range(60)]
    for i, id in enumerate(ids):
        servers[i % 3].create_promise(id, tags={"resonate:target": push_target.url})
    eventually(lambda: len(push_target.received) >= len(ids), timeout=10)
    time.sleep(1.0)  # time enough for any second delivery
    assert Counter(task_of(m) for m in push_target.received) == Counter(ids)
    assert len(push_target.attempts) == len(ids)
    eventually(lambda: servers[0].snap()["messages"] == [])


def test_each_due_timeout_fires_once_across_the_servers(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(3, ("--debug", "--log-level", "debug"))
    servers = cluster.servers
    due = now_ms() + 4000
    ids = [f"t{i}" for i in range(300)]
    # A promise created once its deadline has passed is settled by its create, not by a
    # timeout: on a loaded machine the last creates may come after ``due``.
    armed = sum(
        servers[i % 3].create_promise(id, timeout_at=due, tags={"resonate:timer": "true"})["state"]
        == "pending"
        for i, id in enumerate(ids)
    )
    assert armed >= 100, f"only {armed} promises were created before their deadline"

    def settled() -> bool:
        promises = servers[0].snap()["promises"]
        return all(p["state"] == "resolved" for p in promises)

    eventually(settled, timeout=15, interval=0.2)
    time.sleep(1.5)  # every server has looked again since
    assert cluster.fired() == armed
    assert servers[0].snap()["promiseTimeouts"] == []
