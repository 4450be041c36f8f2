"""``--rate-limit``'s token buckets (``troth.server.ratelimit``), on a clock the test sets."""

from __future__ import annotations

import pytest

from troth.server.ratelimit import RateLimit, client_key


async def _app(scope: object, receive: object, send: object) -> None:
    raise AssertionError("not called")


def test_a_burst_of_one_seconds_worth_then_one_per_interval() -> None:
    limit = RateLimit(_app, 4)
    assert [limit.take("a", 0.0) for _ in range(4)] == [0.0] * 4
    assert limit.take("a", 0.0) == pytest.approx(0.25)  # the wait until a token is back
    assert limit.take("a", 0.25) == 0.0
    assert limit.take("a", 0.25) > 0
    assert limit.take("b", 0.25) == 0.0  # another client has its own bucket


def test_refused_requests_do_not_drain_the_bucket_further() -> None:
    limit = RateLimit(_app, 2)
    limit.take("a", 0.0)
    limit.take("a", 0.0)
    for _ in range(100):
        assert limit.take("a", 0.1) > 0
    assert limit.take("a", 0.5) == 0.0


def test_buckets_of_clients_gone_quiet_are_forgotten() -> None:
    limit = RateLimit(_app, 10)
    # 20,000 clients, 1,000 a second: each bucket is full again 0.1 s after its request.
    for i in range(20_000):
        limit.take(f"10.0.{i // 256}.{i % 256}", i / 1000)
    assert len(limit._buckets) <= 4097


def test_a_crowd_within_one_second_costs_constant_time_per_request() -> None:
    limit = RateLimit(_app, 10)
    for i in range(20_000):  # none refills in time to be forgotten
        limit.take(f"c{i}", 0.0)
    assert len(limit._buckets) == 20_000
    assert limit._prune_at >= 20_000  # not swept again at every request


@pytest.mark.parametrize(
    ("peer", "key"),
    [
        ("192.0.2.7", "192.0.2.7"),
        ("::ffff:192.0.2.7", "192.0.2.7"),
        ("2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"),
        ("2001:db8:1:2:bbbb::9", "2001:db8:1:2::/64"),
    ],
)
def test_ipv6_clients_are_told_apart_by_their_64(peer: str, key: str) -> None:
    assert client_key({"client": (peer, 1234)}) == key
