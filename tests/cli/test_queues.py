"""``troth queues list|get`` and a queued execution in ``troth tree``, against a real
``troth serve`` and a database file: a queue with one slot, three executions of one key
and one of another, no worker (so the line never moves)."""

from __future__ import annotations

import asyncio

import pytest

from troth.protocol.kinds import Kind
from troth.protocol.queues import QueueSetRequest, QueueSpec, Rate

TARGET = "poll://any@idle"  # a group with no worker


@pytest.fixture(scope="module")
def line(place):
    """Queue ``llm`` (one slot) holding acme-1 (offered), acme-2, acme-3 and globex-1."""

    async def fill() -> None:
        app = place.app()
        try:
            spec = QueueSpec("llm", concurrency=1, rate=Rate(100, 60_000))
            reply = await app.runtime.network.send(Kind.QUEUE_SET, QueueSetRequest(spec))
            assert reply.status == 200, reply
            for id, key in (("acme-1", "acme"), ("acme-2", "acme"), ("globex-1", "globex"),
                            ("acme-3", "acme")):  # fmt: skip
                tags = {"resonate:target": TARGET, "troth:queue": "llm", "troth:queue-key": key}
                await app.promises.create(id, timeout=3600, tags=tags)
        finally:
            await app.stop()

    asyncio.run(fill())
    return place


def test_list_shows_each_queue_with_its_counts(troth, line):
    listed = troth("queues", "list", "--json", *line.flags)
    assert listed.code == 0, listed.err
    [queue] = listed.json["queues"]
    assert queue["spec"]["name"] == "llm"
    assert (queue["running"], queue["waiting"]) == (1, 3)
    table = troth("queues", "list", *line.flags).out
    assert "llm" in table and "concurrency 1, rate 100/60000 ms" in table


def test_get_shows_the_busiest_keys(troth, line):
    got = troth("queues", "get", "llm", "--json", *line.flags)
    assert got.code == 0, got.err
    keys = {k["key"]: (k["running"], k["waiting"]) for k in got.json["keys"]}
    assert keys == {"acme": (1, 2), "globex": (0, 1)}
    assert "limitedUntil" not in got.json  # its rate has room
    drawn = troth("queues", "get", "llm", *line.flags).out
    assert "busiest keys" in drawn and "acme" in drawn and "globex" in drawn
    assert "limited until" in drawn


def test_an_unknown_queue_is_exit_5(troth, line):
    ran = troth("queues", "get", "nope", *line.flags)
    assert (ran.code, ran.err) == (5, "troth: queue 'nope': not found\n")


def test_tree_says_where_a_queued_execution_waits(troth, line):
    drawn = troth("tree", "acme-3", *line.flags)
    assert drawn.code == 0, drawn.err
    assert "queued (position 2, waiting for key 'acme')" in drawn.out.splitlines()[0]
    tree = troth("tree", "globex-1", "--json", *line.flags).json
    assert tree["queued"] == {"queue": "llm", "key": "globex", "position": 1}
    offered = troth("tree", "acme-1", "--json", *line.flags).json
    assert "queued" not in offered and offered["state"] == "pending"
