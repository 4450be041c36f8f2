"""Bounded work per request, as attacks on a real ``troth serve``, on both backends.

Each test sends what an attacker sent (issue 11) and checks that it failed safely: a 400
naming the field and the limit, the same on SQLite and PostgreSQL, nothing written, and the
server's memory where it was. Before the limits, 50,000 tags were stored, a search with 994
tag filters took SQLite to gigabytes (995: a 500), PostgreSQL answered 500 to long ids and
to NUL in tags, addresses and schedule ids, and one search answered hundreds of megabytes.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.support.processes import rss_mb
from tests.support.servers import BACKENDS, FAR, TrothServer, serve
from troth.protocol.limits import (
    MAX_ADDRESS_BYTES,
    MAX_FILTERS,
    MAX_ID_BYTES,
    MAX_PAGE_BYTES,
    MAX_TAG_BYTES,
    MAX_TAGS,
)

# Slow: a troth serve process per test (tests/conformance covers the server in the fast suite).
pytestmark = pytest.mark.slow

TARGET = "poll://any@workers"
CONTROL = "must not contain null bytes or other control characters (U+0000-U+001F, U+007F)"
UNADDRESSABLE = "must not contain control characters, quotes or backslashes: percent-encode them"
NUL_TAGS = "must not contain null bytes (U+0000)"
# What a refused request may cost the server: it starts at about 60 MB.
RSS_GROWTH_MB = 50


@pytest.fixture(scope="module", params=BACKENDS)
def live(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TrothServer]:
    with serve(request.param, tmp_path_factory.mktemp("limits")) as server:
        yield server


@pytest.fixture
def server(live: TrothServer) -> TrothServer:
    """The module's server, emptied."""
    live.ok("debug.reset")
    return live


def refused(server: TrothServer, kind: str, data: Any, message: str) -> None:
    """``kind`` is answered exactly 400 ``message``, and nothing was written."""
    before = server.snap()
    assert server.call(kind, data) == (400, message)
    assert server.snap() == before


def schedule(id: str = "nightly", **fields: Any) -> dict[str, Any]:
    data = {
        "id": id,
        "cron": "0 3 * * *",
        "promiseId": "{{.id}}.{{.timestamp}}",
        "promiseTimeout": 60_000,
        "promiseTags": {"resonate:target": TARGET},
    }
    return {**data, **fields}


def task_create(id: str, pid: str = "w1", tags: dict[str, str] | None = None) -> dict[str, Any]:
    action_data = {"id": id, "timeoutAt": FAR, "tags": {"resonate:target": TARGET, **(tags or {})}}
    action = {"kind": "promise.create", "head": {}, "data": action_data}
    return {"pid": pid, "ttl": 30_000, "action": action}


# -- tags ------------------------------------------------------------------------------------

MANY_TAGS = {f"k{i}": "v" for i in range(50_000)}


@pytest.mark.parametrize(
    ("kind", "data", "field"),
    [
        ("promise.create", {"id": "p", "timeoutAt": FAR, "tags": MANY_TAGS}, "tags"),
        ("task.create", task_create("p", tags=MANY_TAGS), "action.data.tags"),
        (
            "schedule.create",
            schedule(promiseTags={"resonate:target": TARGET, **MANY_TAGS}),
            "promiseTags",
        ),
    ],
    ids=["promise", "task", "schedule"],
)
def test_50000_tags_are_refused_and_nothing_is_written(
    server: TrothServer, kind: str, data: Any, field: str
) -> None:
    count = len(MANY_TAGS) + (kind != "promise.create")  # and resonate:target
    refused(server, kind, data, f"{field} has {count} entries: the limit is {MAX_TAGS}")


def test_tags_over_the_byte_limit_are_refused(server: TrothServer) -> None:
    tags = {f"k{i}": "v" * 1000 for i in range(40)}
    size = sum(len(k) + len(v) for k, v in tags.items())
    message = f"tags hold {size} bytes of keys and values: the limit is {MAX_TAG_BYTES} bytes"
    refused(server, "promise.create", {"id": "p", "timeoutAt": FAR, "tags": tags}, message)


def test_as_many_tags_as_allowed_are_stored(server: TrothServer) -> None:
    tags = {f"k{i:02}": "v" * (MAX_TAG_BYTES // MAX_TAGS - 3) for i in range(MAX_TAGS)}
    assert server.create_promise("p", tags=tags)["tags"] == tags


@pytest.mark.parametrize("filters", [994, 20_000])
@pytest.mark.parametrize("kind", ["promise.search", "schedule.search"])
def test_a_search_with_thousands_of_tag_filters_is_refused_and_memory_stays_bounded(
    server: TrothServer, kind: str, filters: int
) -> None:
    server.create_promise("p", tags={"k0": "v"})
    before = rss_mb(server.process.pid)
    tags = {f"k{i}": "v" for i in range(filters)}
    message = f"tags has {filters} entries: the limit is {MAX_FILTERS}"
    for _ in range(3):  # the three requests, each of which kept its gigabytes
        assert server.call(kind, {"tags": tags}) == (400, message)
    after = rss_mb(server.process.pid)
    assert after - before < RSS_GROWTH_MB, (before, after)
    # The most filters allowed are served.
    allowed = {f"k{i}": "v" for i in range(MAX_FILTERS)}
    assert server.call(kind, {"tags": allowed})[0] == 200


# -- ids, addresses and NUL ------------------------------------------------------------------

LONG = "a" * 3000
# 1,000 CJK characters: 3,000 bytes that do not compress (PostgreSQL compresses "a" * 3000
# into its index, so only this one failed there).
WIDE = "".join(chr(0x4E00 + (i * 7919) % 20000) for i in range(1000))


def _long(field: str, size: int = 3000) -> str:
    return f"{field} is {size} bytes long: the limit is {MAX_ID_BYTES} bytes"


CASES = [
    ("promise.create", {"id": LONG, "timeoutAt": FAR}, _long("id")),
    ("promise.create", {"id": WIDE, "timeoutAt": FAR}, _long("id")),
    ("promise.get", {"id": WIDE}, _long("id")),
    ("task.create", task_create(WIDE), _long("action.data.id")),
    ("task.create", task_create("t", pid=WIDE), _long("pid")),
    ("schedule.create", schedule(WIDE), _long("id")),
    (
        "promise.register_listener",
        {"awaited": "awaited", "address": "poll://any@g/" + WIDE},
        f"listener address is 3013 bytes long: the limit is {MAX_ADDRESS_BYTES} bytes",
    ),
    (
        "promise.create",
        {"id": "p", "timeoutAt": FAR, "tags": {"resonate:target": "http://h/" + WIDE}},
        "resonate:target address in tags is 3009 bytes long:"
        f" the limit is {MAX_ADDRESS_BYTES} bytes",
    ),
    ("promise.create", {"id": "p", "timeoutAt": FAR, "tags": {"k": "a\x00b"}}, f"tags {NUL_TAGS}"),
    ("promise.create", {"id": "p", "timeoutAt": FAR, "tags": {"k\x00": "v"}}, f"tags {NUL_TAGS}"),
    ("task.create", task_create("t", tags={"k": "\x00"}), f"action.data.tags {NUL_TAGS}"),
    (
        "promise.register_listener",
        {"awaited": "awaited", "address": "poll://any@g/w\x00"},
        f"listener address {UNADDRESSABLE}",
    ),
    ("schedule.create", schedule("s\x00"), f"id {CONTROL}"),
    (
        "schedule.create",
        schedule(promiseId="p\x00{{.timestamp}}"),
        f"promiseId (expanded) {CONTROL}",
    ),
    (
        "schedule.create",
        schedule(promiseTags={"resonate:target": TARGET, "k": "\x00"}),
        f"promiseTags {NUL_TAGS}",
    ),
    (
        "schedule.create",
        schedule(promiseId="{{.id}}" * 100, id="s" * 100),
        f"promiseId (expanded) is at least 10000 bytes long: the limit is {MAX_ID_BYTES} bytes",
    ),
    ("task.create", task_create("t", pid="w\x00"), f"pid {CONTROL}"),
    ("promise.search", {"cursor": "p\x00"}, f"cursor {CONTROL}"),
]


@pytest.mark.parametrize(("kind", "data", "message"), CASES)
def test_long_ids_and_nul_get_the_same_400_on_every_backend(
    server: TrothServer, kind: str, data: Any, message: str
) -> None:
    server.create_promise("awaited")
    refused(server, kind, data, message)


def _wide(size: int, rng: random.Random, alphabet: str) -> str:
    """``size`` bytes of random, hard-to-compress text drawn from ``alphabet``."""
    text = ""
    while len((text + alphabet[0]).encode()) <= size:
        text += rng.choice(alphabet)
    return text


def test_the_widest_ids_and_addresses_allowed_are_stored(server: TrothServer) -> None:
    """The limits leave room for PostgreSQL's widest index entries: a callback pairs two ids,
    a listener an id and an address, and an unblock's outbox key both, JSON-escaped (a quote
    or backslash takes two bytes there). Random text, so that compression does not help."""
    rng = random.Random(11)
    escaped = '"\\' * 20 + "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    root = _wide(MAX_ID_BYTES - 100, rng, escaped.replace(":", ""))
    awaited = root + ":" + _wide(MAX_ID_BYTES - len(root.encode()) - 1, rng, escaped)
    awaiter = root + ":" + _wide(MAX_ID_BYTES - len(root.encode()) - 1, rng, escaped)
    cjk = "".join(chr(c) for c in range(0x4E00, 0x4E00 + 2000))
    address = "poll://any@g/" + _wide(MAX_ADDRESS_BYTES - 13, rng, cjk)
    assert len(awaited.encode()) == len(awaiter.encode()) == MAX_ID_BYTES
    assert len(address.encode()) > MAX_ADDRESS_BYTES - 3

    server.create_promise(awaited, tags={"resonate:branch": awaited, "resonate:origin": root})
    server.create_promise(awaiter, tags={"resonate:target": TARGET})
    server.ok("promise.register_callback", {"awaited": awaited, "awaiter": awaiter})
    server.ok("promise.register_listener", {"awaited": awaited, "address": address})
    server.ok("promise.settle", {"id": awaited, "state": "resolved"})
    snap = server.snap()
    assert {m["address"] for m in snap["messages"]} >= {address}
    search = server.ok("promise.search", {"tags": {"resonate:branch": awaited}})
    assert [p["id"] for p in search["promises"]] == [awaited]


# -- search pages ----------------------------------------------------------------------------


def test_a_search_over_megabyte_values_is_bounded_and_its_cursor_continues(
    server: TrothServer,
) -> None:
    count = 12
    for i in range(count):
        param = {"data": f"{i:x}" * 1_000_000}
        server.ok("promise.create", {"id": f"big{i:02}", "timeoutAt": FAR, "param": param})

    def page(cursor: str | None) -> tuple[int, dict[str, Any]]:
        data = {"limit": 1000, **({"cursor": cursor} if cursor else {})}
        response = server.send("promise.search", data)
        assert response.status_code == 200
        return len(response.content), response.json()["data"]

    before = rss_mb(server.process.pid)
    with ThreadPoolExecutor(4) as pool:  # four at once took 1.36 GB
        sizes = [size for size, _ in pool.map(page, [None] * 4)]
    # One megabyte record is a page of its own: two would pass the page's byte bound.
    assert max(sizes) < MAX_PAGE_BYTES + 4096, sizes
    assert rss_mb(server.process.pid) - before < RSS_GROWTH_MB

    seen: list[str] = []
    cursor = None
    while True:
        _, data = page(cursor)
        seen += [p["id"] for p in data["promises"]]
        cursor = data.get("cursor")
        if cursor is None:
            break
        assert cursor == seen[-1]
    assert seen == [f"big{i:02}" for i in range(count)]
