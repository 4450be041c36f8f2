"""The limits of ``troth.protocol.limits`` at their edges: the largest input allowed decodes,
one byte (or one entry) more is a 400 naming the field and the limit, in every kind that
carries the field. The attacks themselves, over HTTP on both backends, are in
tests/server/test_limits.py."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.wire import TARGET, VALID, accept, body, mutate, refuse
from troth.protocol.limits import (
    MAX_ADDRESS_BYTES,
    MAX_FILTERS,
    MAX_ID_BYTES,
    MAX_TAG_BYTES,
    MAX_TAGS,
)

ID = "i" * MAX_ID_BYTES
# Multi-byte text is measured in UTF-8 bytes: 128 four-byte characters are 512 bytes.
EMOJI_ID = "🙂" * (MAX_ID_BYTES // 4)
TOO_LONG = "i" * (MAX_ID_BYTES + 1)

# Every place an id sits, as (kind, path to it).
ID_FIELDS = [
    ("promise.get", ("id",)),
    ("promise.create", ("id",)),
    ("promise.settle", ("id",)),
    ("promise.register_listener", ("awaited",)),
    ("task.get", ("id",)),
    ("task.create", ("pid",)),
    ("task.acquire", ("id",)),
    ("task.acquire", ("pid",)),
    ("task.release", ("id",)),
    ("task.heartbeat", ("pid",)),
    ("task.heartbeat", ("tasks", 0, "id")),
    ("task.halt", ("id",)),
    ("task.continue", ("id",)),
    ("schedule.get", ("id",)),
    ("schedule.delete", ("id",)),
    ("schedule.create", ("id",)),
]


def _field(path: tuple[str | int, ...]) -> str:
    text = ""
    for step in path:
        text += f"[{step}]" if isinstance(step, int) else f".{step}"
    return text.lstrip(".")


# Valid requests whose other fields leave the id alone (a schedule's fired ids contain its id).
BASE = {**VALID, "schedule.create": {**VALID["schedule.create"], "promiseId": "{{.timestamp}}"}}


@pytest.mark.parametrize(("kind", "path"), ID_FIELDS)
def test_every_id_is_at_most_512_bytes_and_free_of_control_characters(
    kind: str, path: tuple[str | int, ...]
) -> None:
    def at(value: str) -> bytes:
        return body(kind, mutate(BASE[kind], path, value))

    accept(at(ID))
    accept(at(EMOJI_ID))
    error = refuse(at(TOO_LONG))
    assert error.message == f"{_field(path)} is 513 bytes long: the limit is 512 bytes"
    assert "is 513 bytes long" in refuse(at(EMOJI_ID + "x")).message
    for control in ("\x00", "\n", "\x1f", "\x7f"):
        error = refuse(at(f"p{control}q"))
        assert error.message.startswith(f"{_field(path)} must not contain null bytes")


def test_the_ids_of_callbacks_suspensions_fences_and_fulfils_are_held_too() -> None:
    callback = {"awaited": "p:" + "1" * 600, "awaiter": "p"}
    error = refuse(body("promise.register_callback", callback))
    assert error.message == "awaited is 602 bytes long: the limit is 512 bytes"
    suspend = mutate(VALID["task.suspend"], ("actions", 0, "data", "awaited"), "p:\x00")
    assert refuse(body("task.suspend", suspend)).message.startswith("actions[0].data.awaited")
    fence = mutate(VALID["task.fence"], ("action", "data", "id"), "p:" + "1" * 600)
    assert refuse(body("task.fence", fence)).message.startswith("action.data.id is 602 bytes")
    fulfil = mutate(VALID["task.fulfill"], ("id",), TOO_LONG)
    assert refuse(body("task.fulfill", fulfil)).message.startswith("id is 513 bytes")
    task = mutate(VALID["task.create"], ("action", "data", "id"), TOO_LONG)
    assert refuse(body("task.create", task)).message.startswith("action.data.id is 513 bytes")


def test_a_cursor_is_an_id_and_may_be_empty() -> None:
    for kind in ("promise.search", "task.search", "schedule.search"):
        accept(body(kind, {"cursor": ""}))
        accept(body(kind, {"cursor": ID}))
        assert refuse(body(kind, {"cursor": TOO_LONG})).message.startswith("cursor is 513")


ADDRESS = "poll://any@g/" + "a" * (MAX_ADDRESS_BYTES - len("poll://any@g/"))


@pytest.mark.parametrize(
    ("kind", "path", "field"),
    [
        ("promise.register_listener", ("address",), "listener address"),
        ("promise.create", ("tags", "resonate:target"), "resonate:target address in tags"),
        (
            "schedule.create",
            ("promiseTags", "resonate:target"),
            "resonate:target address in promiseTags",
        ),
    ],
)
def test_every_address_is_at_most_1024_bytes_and_holds_nothing_a_url_encodes(
    kind: str, path: tuple[str, ...], field: str
) -> None:
    base = {"tags": {}, **VALID[kind]}

    def at(value: str) -> bytes:
        return body(kind, mutate(base, path, value))

    accept(at(ADDRESS))
    error = refuse(at(ADDRESS + "a"))
    assert error.message == f"{field} is 1025 bytes long: the limit is 1024 bytes"
    for bad in ('"', "\\", "\x00", "\t"):
        error = refuse(at(f"poll://any@g/w{bad}1"))
        assert error.message.endswith("quotes or backslashes: percent-encode them"), bad


def _tags(count: int, value_bytes: int = 1) -> dict[str, str]:
    return {f"k{i:03}": "v" * value_bytes for i in range(count)}


@pytest.mark.parametrize(
    ("kind", "path", "field", "reserved"),
    [
        ("promise.create", ("tags",), "tags", {}),
        (
            "task.create",
            ("action", "data", "tags"),
            "action.data.tags",
            {"resonate:target": TARGET},
        ),
        ("schedule.create", ("promiseTags",), "promiseTags", {"resonate:target": TARGET}),
    ],
)
def test_tags_are_counted_weighed_and_free_of_nul(
    kind: str, path: tuple[str, ...], field: str, reserved: dict[str, str]
) -> None:
    def with_tags(tags: dict[str, str]) -> bytes:
        return body(kind, mutate(VALID[kind], path, {**tags, **reserved}))

    room = MAX_TAGS - len(reserved)
    accept(with_tags(_tags(room)))
    error = refuse(with_tags(_tags(room + 1)))
    assert error.message == f"{field} has {MAX_TAGS + 1} entries: the limit is {MAX_TAGS}"

    reserved_bytes = sum(len(k) + len(v) for k, v in reserved.items())
    value = (MAX_TAG_BYTES - reserved_bytes) // 10 - 4  # ten tags of "kNNN": value
    accept(with_tags(_tags(10, value)))
    error = refuse(with_tags({**_tags(10, value), "x": "y" * 10}))
    assert error.message.startswith(f"{field} hold ")
    assert error.message.endswith(f"bytes of keys and values: the limit is {MAX_TAG_BYTES} bytes")

    for tags in ({"k": "a\x00"}, {"\x00": "v"}):
        error = refuse(with_tags(tags))
        assert error.message == f"{field} must not contain null bytes (U+0000)"
    accept(with_tags({"k": "tab\tand\nnewline"}))  # other control characters store fine


@pytest.mark.parametrize("kind", ["promise.search", "schedule.search"])
def test_a_search_takes_at_most_16_tag_filters(kind: str) -> None:
    accept(body(kind, {"tags": _tags(MAX_FILTERS)}))
    error = refuse(body(kind, {"tags": _tags(MAX_FILTERS + 1)}))
    assert error.message == f"tags has {MAX_FILTERS + 1} entries: the limit is {MAX_FILTERS}"
    assert refuse(body(kind, {"tags": {"k": "\x00"}})).message == (
        "tags must not contain null bytes (U+0000)"
    )


def _schedule(**fields: Any) -> bytes:
    return body("schedule.create", {**VALID["schedule.create"], **fields})


def test_the_ids_a_schedule_fires_are_held_to_the_id_limit() -> None:
    # The timestamp is counted at its widest, 16 digits: 496 + 16 = 512 bytes.
    accept(_schedule(promiseId="p" * 496 + "{{.timestamp}}"))
    error = refuse(_schedule(promiseId="p" * 497 + "{{.timestamp}}"))
    assert error.message == "promiseId (expanded) is 513 bytes long: the limit is 512 bytes"
    # Many {{.id}} would expand into megabytes: refused from their count, before expanding.
    error = refuse(_schedule(id="s" * 500, promiseId="{{.id}}" * 200_000))
    assert error.message == (
        "promiseId (expanded) is at least 100000000 bytes long: the limit is 512 bytes"
    )
    # A bad schedule id is reported once, not again in every id it would fire.
    error = refuse(_schedule(id="s\x00"))
    assert error.message.startswith("id must not contain null bytes")
    assert "promiseId" not in error.message


def test_the_id_tags_a_schedule_puts_on_its_promises_are_ids() -> None:
    for tag in ("resonate:origin", "resonate:branch", "resonate:parent"):
        tags = {"resonate:target": TARGET, tag: TOO_LONG}
        error = refuse(_schedule(promiseTags=tags))
        assert error.message == f"{tag} in promiseTags is 513 bytes long: the limit is 512 bytes"


def test_what_the_official_sdks_send_is_far_within_the_limits() -> None:
    """Ids, tags and addresses as the TypeScript and Python SDKs mint them."""
    root = "order-2026-04-01-8f14e45fceea167a5a36dedd4bea2543"
    child = f"{root}:1.2.3.4.5.6.7.8"
    tags = {
        "resonate:target": "poll://any@default/4f5e1d7c-0a3b-4c2d-9e8f-1a2b3c4d5e6f",
        "resonate:origin": root,
        "resonate:branch": child,
        "resonate:parent": f"{root}:1.2.3.4.5.6.7",
        "resonate:scope": "global",
        "resonate:timer": "true",
    }
    accept(body("promise.create", {"id": child, "timeoutAt": 1000, "tags": tags}))
    assert len(child.encode()) * 4 < MAX_ID_BYTES
    assert sum(len(k) + len(v) for k, v in tags.items()) * 50 < MAX_TAG_BYTES
