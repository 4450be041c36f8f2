"""The outbox's transition properties: the messages a step enqueues (an execute names its
task's current version and its target, an unblock carries the stored record and discharges
a listener) and the keys that must stay.

The outbox's state properties relate each message to the task or promise it names, so they
sit with the other cross-object ones in ``store``.
"""

from __future__ import annotations

from collections.abc import Iterator

from troth.oracle.invariants.core import Finding, Step, _ledger, step_property
from troth.protocol.messages import ExecuteData, UnblockData
from troth.protocol.records import TARGET
from troth.protocol.responses import OutboxEntry


def _new_messages(s: Step) -> Iterator[OutboxEntry]:
    """Messages the step enqueued: a key not there before, or an entry that changed."""
    for key, entry in s.after.messages.items():
        if s.before.messages.get(key) != entry:
            yield entry


@step_property
def monotone_outbox_keys_never_disappear(s: Step) -> Iterator[Finding]:
    if not s.outbox_retained:
        return
    for key in s.before.messages.keys() - s.after.messages.keys():
        yield key[1:], f"outbox entry {key} disappeared"


@step_property
def consistent_new_execute_matches_task_and_target(s: Step) -> Iterator[Finding]:
    for entry in _new_messages(s):
        data = entry.message.data
        if not isinstance(data, ExecuteData):
            continue
        t, p = s.after.tasks.get(data.task.id), s.after.promises.get(data.task.id)
        target = p.tags.get(TARGET, "") if p else None
        if t is None or data.task.version != t.version or entry.address != target:
            yield (
                (data.task.id,),
                (
                    f"execute v{data.task.version} to {entry.address!r}; task "
                    f"v{t.version if t else None}, target {target!r}"
                ),
            )


@step_property
def consistent_new_unblock_carries_stored_record(s: Step) -> Iterator[Finding]:
    for entry in _new_messages(s):
        data = entry.message.data
        if isinstance(data, UnblockData) and data.promise != s.after.promises.get(data.promise.id):
            yield (data.promise.id,), "unblock carries a record other than the stored one"


@step_property
def consistent_new_unblock_discharges_its_listener(s: Step) -> Iterator[Finding]:
    for entry in _new_messages(s):
        data = entry.message.data
        if not isinstance(data, UnblockData):
            continue
        id = data.promise.id
        held_before = entry.address in _ledger(s.before, "listeners", id)
        held_after = entry.address in _ledger(s.after, "listeners", id)
        if not held_before or held_after:
            yield (id,), f"unblock to {entry.address} without discharging that listener"
