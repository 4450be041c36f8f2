"""The timeouts sweep's unit of work: fire a run of due timeouts in one transaction.

Several servers may sweep one database at once. Each due timeout is claimed by taking its
object's lock (``PostgresStore.claim``); a timeout whose object another transaction holds
is skipped for now, so two sweeps spread the work between them instead of queueing on the
same head, and an entry found gone was fired by the other sweep. A run fires in firing
order and ends early when a transition armed a deadline that is already due, so the
sweep reads the due list again and fires that one in its place in the order.

A run commits once for all it fired: the commit's WAL flush, not the transitions, is what
a sweep of many small transitions mostly waits for.
"""

from __future__ import annotations

from typing import NamedTuple

from troth.engine import Timeout, fire
from troth.engine.timeouts import LEAN, CatchUp
from troth.storage.postgres.store import PostgresStore


class Run(NamedTuple):
    fired: int
    progressed: bool  # False when every timeout of the run was held by someone else
    scheduled: int  # promises created by schedules


def fire_run(
    store: PostgresStore,
    due: list[Timeout],
    now: int,
    *,
    wait: bool,
    policy: CatchUp = LEAN,
    defer_idle: bool = False,
) -> Run:
    """Fire what can be claimed of ``due`` (in order) at ``now``; with ``wait``, wait for
    each object's lock instead of skipping it; with ``defer_idle``, defer the idle retries
    (``troth.engine.timeouts.defer_idle_retry``). A schedule catches up by ``policy``, a chunk
    per firing; a chunk that leaves occurrences missed re-arms a due deadline, which ends
    the run, so one transaction creates at most one chunk."""
    fired = scheduled = 0
    progressed = False
    for timeout in due:
        claimed = store.claim(timeout, wait=wait)
        if claimed is None:
            continue
        progressed = True
        if not claimed:
            continue
        scheduled += fire(store, timeout, now, policy, defer_idle=defer_idle)
        fired += 1
        if store.earliest_armed is not None and store.earliest_armed <= now:
            break
    return Run(fired, progressed, scheduled)
