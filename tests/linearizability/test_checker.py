"""The checker on hand-made histories: it accepts what some order explains, and only that.

Responses are the oracle's own answers to single requests, so a history is wrong only in
the way each test makes it wrong (a response no order can produce, or an order real time
forbids).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.linearizability.checker import Inconclusive, Operation, check, partition
from tests.linearizability.targets import Envelope, envelope
from troth.oracle import Oracle

R = 1_500
TARGETED = {"resonate:target": "poll://any@workers"}
NOW = 1_000


def request(kind: str, data: dict[str, Any], now: int = NOW) -> Envelope:
    return envelope(kind, data, kind, now)


def answers(*requests: Envelope) -> list[Envelope]:
    """What a fresh oracle answers to ``requests`` sent one after another."""
    oracle = Oracle(R)
    return [oracle.apply(r) for r in requests]


def op(client: int, call: int, ret: int, req: Envelope, response: Envelope) -> Operation:
    return Operation(client, call, ret, req, response)


def failed(req: Envelope, status: int = 500) -> Envelope:
    head = {"corrId": req["head"]["corrId"], "status": status, "version": "2026-04-01"}
    return {"kind": req["kind"], "head": head, "data": "Internal error: connection lost"}


def create(id: str, timeout_at: int = 10**9, now: int = NOW) -> Envelope:
    data = {"id": id, "timeoutAt": timeout_at, "param": {}, "tags": TARGETED}
    return request("promise.create", data, now)


def get(id: str, now: int = NOW) -> Envelope:
    return request("promise.get", {"id": id}, now)


def acquire(id: str, pid: str) -> Envelope:
    return request("task.acquire", {"id": id, "version": 0, "pid": pid, "ttl": 60_000})


def test_two_clients_cannot_both_acquire_the_same_version() -> None:
    made = create("p")
    by_w1, by_w2 = acquire("p", "w1"), acquire("p", "w2")
    created, won_w1, lost_w2 = answers(made, by_w1, by_w2)
    _, won_w2 = answers(made, by_w2)
    assert won_w1["head"]["status"] == won_w2["head"]["status"] == 200
    assert lost_w2["head"]["status"] == 409

    def history(w1: Envelope, w2: Envelope) -> list[Operation]:
        return [op(0, 0, 1, made, created), op(1, 2, 5, by_w1, w1), op(2, 3, 6, by_w2, w2)]

    assert check(history(won_w1, lost_w2), R).ok
    both_won = check(history(won_w1, won_w2), R)
    assert not both_won.ok
    assert "task.acquire" in both_won.explain()


def test_either_of_two_overlapping_operations_may_come_first() -> None:
    made, by_w1, by_w2 = create("p"), acquire("p", "w1"), acquire("p", "w2")
    created, won_w2, lost_w1 = answers(made, by_w2, by_w1)
    history = [op(0, 0, 1, made, created), op(1, 2, 5, by_w1, lost_w1), op(2, 3, 6, by_w2, won_w2)]
    assert check(history, R).ok  # w2 first, though w1 was sent first
    # Once w1 had its answer before w2 was sent, w1 comes first and cannot have lost.
    sequential = [history[0], op(1, 2, 3, by_w1, lost_w1), op(2, 4, 6, by_w2, won_w2)]
    assert not check(sequential, R).ok


def test_a_read_cannot_miss_a_write_that_finished_before_it_began() -> None:
    made, read = create("p"), get("p")
    created, missing = answers(made)[0], answers(read)[0]
    assert missing["head"]["status"] == 404
    overlapping = [op(0, 0, 3, made, created), op(1, 1, 4, read, missing)]
    assert check(overlapping, R).ok
    after = [op(0, 0, 1, made, created), op(1, 2, 4, read, missing)]
    assert not check(after, R).ok


def test_an_unanswered_operation_may_or_may_not_have_happened() -> None:
    made, read = create("p"), get("p")
    absent = answers(read)[0]
    present = answers(made, read)[1]
    lost = failed(made)
    # The 500 took effect at some point after both reads began: 404 then 200 is fine.
    assert check([op(0, 0, 1, made, lost), op(1, 2, 3, read, absent),
                  op(1, 4, 5, read, present)], R).ok  # fmt: skip
    # ... or it never did.
    assert check([op(0, 0, 1, made, lost), op(1, 2, 3, read, absent)], R).ok
    # But a promise seen once does not disappear again.
    assert not check([op(0, 0, 1, made, lost), op(1, 2, 3, read, present),
                      op(1, 4, 5, read, absent)], R).ok  # fmt: skip


def test_a_tick_between_phases_settles_what_came_due() -> None:
    later = NOW + 1_000
    made = create("p", timeout_at=NOW + 500)
    tick = request("debug.tick", {"time": later}, later)
    read = get("p", later)
    created, ticked, timed_out = answers(made, tick, read)
    assert timed_out["data"]["promise"]["state"] == "rejected_timedout"
    history = [op(0, 0, 1, made, created), op(-1, 2, 3, tick, ticked), op(1, 4, 5, read, timed_out)]
    assert check(history, R).ok
    still_pending = {**timed_out, "data": created["data"]}
    assert not check([*history[:2], op(1, 4, 5, read, still_pending)], R).ok


def test_origins_are_checked_apart_and_a_violation_names_its_origin() -> None:
    history: list[Operation] = []
    for n, id in enumerate(("a", "b")):
        made, read = create(id), get(id)
        created, seen = answers(made, read)
        history += [op(n, 0, 1, made, created), op(n, 2, 3, read, seen)]
    assert set(partition(history)) == {"a", "b"}
    assert check(history, R).ok
    gone = answers(get("b"))[0]  # a 404 for b after b's creation returned
    history[3] = op(1, 2, 3, get("b"), gone)
    verdict = check(history, R)
    assert not verdict.ok and verdict.origin == "b"


def test_a_request_naming_two_origins_cannot_be_partitioned() -> None:
    data = {"awaited": "a", "awaiter": "b:1"}
    req = request("promise.register_callback", data)
    with pytest.raises(ValueError, match="origins"):
        partition([op(0, 0, 1, req, failed(req, 400))])


def test_a_search_past_its_limit_is_inconclusive_not_a_verdict() -> None:
    made = create("p")
    created = answers(made)[0]
    reads = [op(n, 0, 10, get("p"), answers(made, get("p"))[1]) for n in range(1, 4)]
    history = [op(0, 0, 10, made, created), *reads]
    assert check(history, R).ok
    with pytest.raises(Inconclusive):
        check(history, R, limit=2)
