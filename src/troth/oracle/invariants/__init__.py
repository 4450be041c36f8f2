"""The property catalogue, checked against ``debug.snap`` snapshots.

``check_state(snap, now)`` judges one state; ``check_step(before, after, now)`` judges one
step (a request, or a whole ``debug.tick``). Both answer the violated properties by their
catalogue names (docs/references.md#the-property-catalogue), so a report reads the same
here as in the Lean, Go and TypeScript checkers. The checker reads only the wire snapshot,
so it judges the oracle and the server alike.

The catalogue is written for HEAD's machine; troth runs 83d64c3 behind its 400 doors
(docs/semantics.md). The store is read through the catalogue's mapping: a task's
``expiresAt`` is its lease row (``taskTimeouts`` type 1) and ``retryAt`` its retry row
(type 0). The ✓E entries hold because ``debug.tick`` fires a timeout only once it is due. A
tick may run several internal transitions in one step; every property below also holds for
such a composition (where that needed a word, the check says so).

State properties implemented: every ✓ and ✓E entry, and the ✗door entries the doors
close: 5, 6, 10 (settle to ``pending`` or ``rejected_timedout`` is refused), 14 (self-await
is refused at register_callback and task.suspend), 35 and 37 (an untargeted task.create is
refused), 38 and 43 (listener addresses are validated), 44 (settle to ``pending``), 45
(an empty suspend is refused).

State properties excluded:

- 9 ``well_formed_promise_timer_not_targeted`` and 27
  ``well_formed_schedule_promise_tags_not_timer_targeted``: troth accepts timer+target, as
  83d64c3 does (the timer decides the verdict).
- 13 ``well_formed_promise_obligations_require_external``: callbacks, listeners and
  suspensions on internal promises are accepted, as in 83d64c3 (their awaiters strand).
- 25 ``well_formed_task_resumes_unique``: the snapshot shows ``resumes`` as a count.

Transition properties implemented: every ✓ and ✓E entry, and the ✗door entries 9,
10, 22, 28, 42 and 43 (closed by the settle doors and the targeted task.create door).
Three are weaker than the catalogue's because ``resumes`` is a count: 24 and 26 ask for a
non-empty ``resumes`` rather than the awaited id in it, and 38 asks the count to grow or
drop to zero. Three depend on the outbox keeping what it holds, which the oracle does and
the server does not (delivery removes messages): 25, 29 and the message half of
``eager_pending_entry_arms_retry``; ``outbox_retained=False`` turns them off.

Transition properties excluded:

- 12 ``monotone_promise_callbacks_grow_while_pending`` and 23
  ``consistent_obligation_discharge_requires_settled``: 83d64c3's settlement scrub removes
  the settling promise from the callbacks of other, still pending promises.
  ``consistent_obligation_discharge_requires_settlement_or_scrub`` checks what does hold.
- 27 ``consistent_suspension_registers_callback``: false for HEAD's machine too (a known
  defect: a suspension may add no new callback); state property 45 checks the sound form.
- 40 ``preserved_no_dead_dispatch`` and 41 ``preserved_execute_only_for_live_task``: 83d64c3
  re-pends and dispatches dead tasks (lease and retry expiry, task.continue, resume of a dead
  awaiter, a schedule's backlogged occurrences).
- 47 ``consistent_task_pending_entry_arms_retry`` and 50 ``consistent_task_wake_records_resume``:
  83d64c3 dispatches eagerly (retry at ``now + retryTimeout`` plus an execute) where HEAD
  sets ``retryAt = now``. ``eager_pending_entry_arms_retry`` checks 83d64c3's form, and the
  rest of 50 (version kept, resume recorded) is in 5 and 26.

Prose invariants (the DAA pages') that hold are either the catalogue entry that restates them
(``PROSE_NAMES``) or, where the catalogue has no image because HEAD has no timer tables,
checked here under their own names: ``missing_ptimeout`` (in its corrected form: every
pending *external* promise is armed, at its ``timeoutAt``), ``arming_is_external_only``,
``stale_ptimeout``, ``listener_for_settled_promise``. troth adds the same for the other
tables (``stale_ttimeout``, ``schedule_timeout_matches_next_run_at``) and
``callback_for_settled_promise`` (83d64c3 drains both ledgers at settlement; it implies the
prose ``suspended_with_consumed_callbacks``). ``missing_ptimeout`` as worded (every pending
promise armed) is false by design and not checked.

The checks are kept by object, one module each, over ``core`` (the snapshot ``View``, the
``Step``, the registries): ``promises``, ``tasks`` and ``schedules`` (each object's state and
transition properties), ``outbox`` (the messages a step enqueues), ``store`` (unique keys,
and the state properties across objects) and ``timers`` (83d64c3's timeout tables).
"""

from __future__ import annotations

# Each module enters its checks in the registries as it is imported, so this order is the
# order of every report's violations: the order of the one module the checks once were.
# isort: off
from troth.oracle.invariants import promises, tasks, outbox, schedules, store, timers  # noqa: F401

# isort: on
from troth.oracle.invariants.core import (
    LEASE,
    RETRY,
    STATE_PROPERTIES,
    STEP_PROPERTIES,
    Finding,
    MessageKey,
    StateCheck,
    Step,
    StepCheck,
    View,
    Violation,
    message_key,
    state_property,
    step_property,
    view,
)
from troth.oracle.invariants.tasks import TASK_EDGES
from troth.protocol.responses import Snapshot

__all__ = [
    "LEASE",
    "PROSE_NAMES",
    "RETRY",
    "STATE_PROPERTIES",
    "STEP_PROPERTIES",
    "TASK_EDGES",
    "Finding",
    "MessageKey",
    "StateCheck",
    "Step",
    "StepCheck",
    "View",
    "Violation",
    "check_state",
    "check_step",
    "message_key",
    "state_property",
    "step_property",
    "view",
]

# The prose invariants that a catalogue entry restates (or strengthens).
PROSE_NAMES: dict[str, str] = {
    "orphan_invokes": "consistent_task_iff_targeted_promise",
    "orphan_tasks": "consistent_task_iff_targeted_promise",
    "timedout_settled_at_mismatch": "well_formed_promise_timedout_is_server_owned",
    "pending_task_no_ttimeout": "well_formed_task_pending_iff_has_retry_at",
    "acquired_task_no_lease": "well_formed_task_acquired_iff_has_expires_at",
    "suspended_no_callback": "consistent_suspended_task_holds_rung",
    "suspended_task_has_ttimeout": "well_formed_task_suspended_is_cleared",
    "fulfilled_task_has_ttimeout": "well_formed_task_fulfilled_is_cleared",
    "callback_awaiter_no_target": "consistent_callback_awaiter_is_targeted",
    "suspended_with_consumed_callbacks": "callback_for_settled_promise",
}


def check_state(snap: Snapshot, now: int) -> list[Violation]:
    """Every state property that fails in ``snap`` at instant ``now``."""
    v = view(snap)
    return [
        Violation(name, ids, detail)
        for name, check in STATE_PROPERTIES.items()
        for ids, detail in check(v, now)
    ]


def check_step(
    before: Snapshot,
    after: Snapshot,
    now: int,
    *,
    outbox_retained: bool = True,
    retry_timeout: int = 5000,
) -> list[Violation]:
    """Every transition property the step ``before -> after`` at ``now`` breaks.

    ``outbox_retained=False`` is for servers that delete delivered messages: the checks that
    expect a message to stay in the outbox are skipped. ``retry_timeout`` is the server's.
    """
    b, a = view(before), view(after)
    step = Step(
        b,
        a,
        now,
        outbox_retained,
        retry_timeout,
        frozenset(
            i for i in b.promises.keys() | a.promises if b.promise_facts(i) != a.promise_facts(i)
        ),
        frozenset(i for i in b.tasks.keys() | a.tasks if b.task_facts(i) != a.task_facts(i)),
    )
    return [
        Violation(name, ids, detail)
        for name, check in STEP_PROPERTIES.items()
        for ids, detail in check(step)
    ]
