"""An execution's promises read as its call tree: every child under its parent, each
node's kind, function, timings, attempts and last error, whichever SDK wrote them.

The records here are shaped as the SDKs write them; tests/storage/test_views.py builds
trees from real executions."""

from __future__ import annotations

import pytest

from troth.protocol.conventions import (
    ATTEMPT_TAG,
    FUNC_TAG,
    SCOPE,
    STEP_TAG,
    attempt_id,
    cancel_request,
    halt_id,
)
from troth.protocol.records import (
    BRANCH,
    ORIGIN,
    PARENT,
    TARGET,
    TIMER,
    PromiseRecord,
    PromiseState,
    TaskState,
    Value,
)
from troth.sdk.codec import Codec
from troth.views.tree import Node, build, from_json, to_json
from troth.views.values import json_value

CODEC = Codec()


def record(
    id: str,
    parent: str,
    tags: dict[str, str],
    *,
    state: PromiseState = PromiseState.RESOLVED,
    at: int = 1000,
    settled: int | None = 1500,
    param: Value | None = None,
    value: Value | None = None,
) -> PromiseRecord:
    lineage = {ORIGIN: "order", PARENT: parent, BRANCH: id}
    return PromiseRecord(
        id=id,
        state=state,
        param=param or Value(),
        value=value or Value(),
        tags={**lineage, **tags},
        timeout_at=10**12,
        created_at=at,
        settled_at=None if state == PromiseState.PENDING else settled,
    )


def troth_execution() -> list[PromiseRecord]:
    """order: a step that failed twice and is waiting for its third attempt, an rpc that
    finished, a sleep, a halt and a cancellation asked for."""
    error = CODEC.encode(ConnectionError("card service down"))
    root = record(
        "order",
        "order",
        {FUNC_TAG: "checkout", SCOPE: "global", TARGET: "poll://any@workers"},
        state=PromiseState.PENDING,
        param=CODEC.encode({"func": "checkout", "args": [7]}),
    )
    charge = record(
        "order:1", "order", {STEP_TAG: "run:charge", SCOPE: "local"}, state=PromiseState.PENDING,
        at=1100,
    )  # fmt: skip
    attempts = [
        record(attempt_id("order:1", n), "order:1", {STEP_TAG: "attempt", ATTEMPT_TAG: str(n)},
               state=PromiseState.REJECTED, at=1100 + n, value=error)
        for n in (1, 2)
    ]  # fmt: skip
    rpc = record(
        "order:0", "order", {STEP_TAG: "rpc:reserve", SCOPE: "global"}, at=1010, settled=1090,
        value=CODEC.encode("reserved"),
    )  # fmt: skip
    sleep = record("order:2", "order", {STEP_TAG: "sleep", TIMER: "true"}, at=1200)
    halt = record(halt_id("order", 1), "order", {SCOPE: "global"}, at=1300)
    cancel_create = cancel_request(root)
    cancel = record(cancel_create.id, "order", cancel_create.tags, at=1400, settled=1450)
    recording = record(
        attempt_id("order:1", 3),
        "order:1",
        {STEP_TAG: "attempt"},
        state=PromiseState.PENDING,
        at=1103,
    )  # created, its error not yet in
    return [sleep, *attempts, recording, cancel, halt, charge, rpc, root]


def test_children_hang_under_their_parents_in_creation_order() -> None:
    tree = build("order", troth_execution())
    assert tree.kind == "root"
    assert [c.id for c in tree.children] == [
        "order:0", "order:1", "order:2", "order:halt1", "order:cancel",
    ]  # fmt: skip
    charge = tree.children[1]
    assert [c.id for c in charge.children] == [f"order:1.attempt{n}" for n in (1, 2, 3)]


def test_each_node_says_what_it_was_created_for() -> None:
    tree = build("order", troth_execution())
    kinds = {node.id: (node.kind, node.function) for node in tree.walk()}
    assert kinds == {
        "order": ("root", "checkout"),
        "order:0": ("rpc", "reserve"),
        "order:1": ("run", "charge"),
        "order:1.attempt1": ("attempt", None),
        "order:1.attempt2": ("attempt", None),
        "order:1.attempt3": ("attempt", None),
        "order:2": ("sleep", None),
        "order:halt1": ("halt", None),
        "order:cancel": ("cancel", None),
    }


@pytest.mark.parametrize("state", [PromiseState.PENDING, PromiseState.REJECTED_CANCELED])
def test_a_cancel_promise_nobody_resolved_is_left_out(state: PromiseState) -> None:
    # Pending (made at a suspend, waiting for a request) or closed unasked at the end: it
    # showed as a child "rejected canceled" with the error "canceled" under a finished run.
    records = [r for r in troth_execution() if r.id != "order:cancel"]
    unasked = record("order:cancel", "order", cancel_request(records[-1]).tags, state=state)
    ids = [node.id for node in build("order", [*records, unasked]).walk()]
    assert "order:cancel" not in ids and "order:1" in ids


def test_a_retried_step_shows_its_attempts_and_last_error() -> None:
    charge = next(n for n in build("order", troth_execution()).walk() if n.id == "order:1")
    assert charge.state == PromiseState.PENDING
    assert charge.attempts == 4  # three failed (the third being recorded), the fourth next
    assert charge.last_error == "ConnectionError: card service down"


def test_timings_and_decoded_values() -> None:
    tree = build("order", troth_execution(), {"order": TaskState.HALTED})
    rpc = tree.children[0]
    assert (rpc.created_on, rpc.settled_on, rpc.duration_ms) == (1010, 1090, 80)
    assert rpc.value.data == "reserved"
    assert tree.task == TaskState.HALTED
    assert tree.duration_ms is None  # still pending
    assert tree.param.data == {"func": "checkout", "args": [7]}


def test_rejections_name_their_error() -> None:
    records = [
        record("r", "r", {FUNC_TAG: "f"}, state=PromiseState.REJECTED,
               value=CODEC.encode(KeyError("sku"))),
        record("r:0", "r", {STEP_TAG: "run:a"}, state=PromiseState.REJECTED_TIMEDOUT),
        record("r:1", "r", {STEP_TAG: "run:b"}, state=PromiseState.REJECTED_CANCELED),
        record("r:2", "r", {STEP_TAG: "run:c"}, state=PromiseState.REJECTED,
               value=json_value("plain reason")),
    ]  # fmt: skip
    tree = build("r", records)
    assert tree.last_error is not None and tree.last_error.startswith("KeyError")
    assert [c.last_error for c in tree.children] == ["timed out", "canceled", "plain reason"]


def test_official_sdk_executions_read_by_their_tags() -> None:
    """The official SDKs tag lineage and scope only; the invocation names the function."""
    invocation = Value(headers={}, data=json_value({"func": "greet", "args": []}).data)
    records = [
        record("g", "g", {TARGET: "poll://any@ts"}, param=invocation),
        record("g:0", "g", {SCOPE: "local"}, at=1001),
        record("g:1", "g", {SCOPE: "global", TARGET: "poll://any@ts"}, at=1002, param=invocation),
        record("g:2", "g", {SCOPE: "global", TIMER: "true"}, at=1003),
        record("g:3", "g", {SCOPE: "global"}, at=1004),
    ]
    tree = build("g", records)
    assert tree.function == "greet"
    assert [(c.kind, c.function) for c in tree.children] == [
        ("run", None), ("rpc", "greet"), ("sleep", None), ("promise", None),
    ]  # fmt: skip


def test_a_missing_parent_hangs_its_child_under_the_nearest_ancestor() -> None:
    records = [
        record("o", "o", {}),
        record("o:1.4", "o:1", {STEP_TAG: "run:x"}),  # o:1 itself is not among the records
        record("o:2", "o:2", {STEP_TAG: "run:y"}),  # no parent tag of its tree
        record("other:1", "other", {}),  # another execution's
    ]
    tree = build("o", records)
    assert sorted(c.id for c in tree.children) == ["o:1.4", "o:2"]


def test_ties_in_time_read_ids_naturally() -> None:
    records = [record("o", "o", {})] + [record(f"o:{n}", "o", {}) for n in (10, 2, 1)]
    assert [c.id for c in build("o", records).children] == ["o:1", "o:2", "o:10"]


def test_json_round_trips() -> None:
    tree = build("order", troth_execution(), {"order": TaskState.SUSPENDED})
    assert from_json(to_json(tree)) == tree


def test_a_thousand_steps_build_a_thousand_children() -> None:
    # How long a tree of 1,000 nodes takes to read, build and draw is bench/views.py's figure.
    records = [record("big", "big", {FUNC_TAG: "fan"})]
    records += [record(f"big:{n}", "big", {STEP_TAG: "run:part"}, at=1000 + n) for n in range(1000)]
    tree: Node = build("big", records)
    assert len(tree.children) == 1000
