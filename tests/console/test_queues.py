"""The console's Queues pages over plain HTTP against a real ``troth serve``: the list,
one queue's busiest keys, and a queued execution's place on its page."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.console.test_routes import Visitor
from tests.support.servers import FAR, TrothServer

pytestmark = pytest.mark.slow  # a troth serve process


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TrothServer]:
    """Queue ``llm`` (one slot) with acme-1 offered, acme-2 and acme-3 waiting, and the
    hostile-named queue ``<b>``, empty."""
    folder = tmp_path_factory.mktemp("console-queues")
    server = TrothServer(folder / "t.db", folder / "server.log", ["--debug"]).start()
    server.ok("queue.set", {"queue": {"name": "llm", "concurrency": 1, "keyConcurrency": 1}})
    server.ok("queue.set", {"queue": {"name": "<b>"}})
    for id in ("acme-1", "acme-2", "acme-3"):
        tags = {"resonate:target": "poll://any@nobody", "troth:queue": "llm",
                "troth:queue-key": "acme", "resonate:origin": id}  # fmt: skip
        server.ok("promise.create", {"id": id, "timeoutAt": FAR, "param": {}, "tags": tags})
    yield server
    server.close()


def test_the_queues_page_lists_each_queue_with_its_counts(server: TrothServer) -> None:
    page = Visitor(server).get("/console/queues")
    assert page.status_code == 200
    text = page.text
    assert 'href="/console/queues" aria-current="page"' in text
    assert "/console/queue?name=llm" in text and "concurrency 1, per key 1" in text
    assert "<td>1</td><td>2</td>" in text  # running, waiting
    assert "<code>&lt;b&gt;</code>" in text and "<code><b></code>" not in text


def test_a_queue_page_shows_its_busiest_keys(server: TrothServer) -> None:
    visitor = Visitor(server)
    page = visitor.get("/console/queue", name="llm")
    assert page.status_code == 200
    assert "Busiest keys" in page.text
    assert "<tr><td><code>acme</code></td><td>1</td><td>2</td>" in page.text
    assert visitor.get("/console/queue", name="nope").status_code == 404
    missing = visitor.get("/console/queue")
    assert missing.status_code == 400 and "name" in missing.text


def test_a_queued_execution_shows_its_place(server: TrothServer) -> None:
    page = Visitor(server).get("/console/execution", id="acme-3")
    assert page.status_code == 200
    assert "queued (position 2, waiting for key &#x27;acme&#x27;)" in page.text or (
        "queued (position 2, waiting for key &#39;acme&#39;)" in page.text
    )
    offered = Visitor(server).get("/console/execution", id="acme-1").text
    assert "queued (" not in offered
