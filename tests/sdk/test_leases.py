"""The lease rule: a run may start a step only while its task's lease is certainly held."""

from __future__ import annotations

import asyncio

import pytest

from troth.sdk.clock import VirtualClock
from troth.sdk.leases import HeldTask, Leases

TTL = 1_000


def leases_at(start: int = 0) -> tuple[Leases, VirtualClock]:
    clock = VirtualClock(start)
    return Leases(clock, ttl_ms=TTL), clock


def test_a_lease_is_certain_until_ttl_after_the_acquire_was_sent():
    leases, clock = leases_at()
    task = HeldTask("t", 1)
    leases.hold(task, sent=0)
    clock.advance_to(TTL - 1)
    assert leases.lost(task) is None
    clock.advance_to(TTL)
    assert "may have lapsed" in (leases.lost(task) or "")


def test_an_acknowledged_heartbeat_renews_from_its_send_time():
    leases, clock = leases_at()
    task = HeldTask("t", 1)
    leases.hold(task, sent=0)
    clock.advance_to(600)
    leases.renewed([task], sent=500)
    clock.advance_to(500 + TTL - 1)
    assert leases.lost(task) is None


def test_a_heartbeat_acknowledged_after_the_lease_may_have_lapsed_renews_nothing():
    # The server may have applied it after the lease lapsed, when it no longer extended it.
    leases, clock = leases_at()
    task = HeldTask("t", 1)
    leases.hold(task, sent=0)
    clock.advance_to(TTL)
    leases.renewed([task], sent=900)
    assert leases.lost(task) is not None


def test_a_newer_run_of_the_task_takes_the_lease_and_the_older_run_loses_it():
    leases, _ = leases_at()
    old, new = HeldTask("t", 1), HeldTask("t", 2)
    leases.hold(old, sent=0)
    leases.hold(new, sent=0)
    assert "newer run" in (leases.lost(old) or "")
    assert leases.lost(new) is None
    leases.drop(old)  # the older run ends: the newer one keeps its lease
    assert leases.held() == [new]
    leases.drop(new)
    assert leases.held() == []


@pytest.mark.anyio
async def test_the_heartbeat_waits_until_a_task_is_held():
    leases, _ = leases_at()
    waiting = asyncio.ensure_future(leases.any_held())
    await asyncio.sleep(0)
    assert not waiting.done()
    leases.hold(HeldTask("t", 1), sent=0)
    await asyncio.wait_for(waiting, 1)
