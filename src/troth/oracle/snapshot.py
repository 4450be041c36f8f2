"""The machine's state as ``debug.snap`` shows it: stored records, wire-shaped, sorted.

The mapping is docs/semantics.md's: ``callbacks`` lists each promise's awaiters, a task's
``resumes`` is a count, ``taskTimeouts`` carry the Lean kind as ``type`` and messages have
``head: {}`` (no ``serverUrl``).
"""

from __future__ import annotations

from troth.oracle.state import ServerState
from troth.protocol import responses as wire


def snapshot(s: ServerState) -> wire.Snapshot:
    return wire.make_snapshot(
        promises=[p.to_record() for p in s.promises],
        promise_timeouts=[wire.PromiseTimeoutEntry(t.id, t.timeout) for t in s.promise_timeouts],
        callbacks=[
            wire.CallbackEntry(awaiter=awaiter, awaited=p.id)
            for p in s.promises
            for awaiter in p.callbacks
        ],
        listeners=[
            wire.ListenerEntry(id=p.id, address=address)
            for p in s.promises
            for address in p.listeners
        ],
        tasks=[t.to_record() for t in s.tasks],
        task_timeouts=[wire.TaskTimeoutEntry(t.id, t.kind, t.timeout) for t in s.task_timeouts],
        messages=[wire.OutboxEntry(e.address, e.message) for e in s.outbox],
        schedules=list(s.schedules),
        schedule_timeouts=[wire.ScheduleTimeoutEntry(t.id, t.timeout) for t in s.schedule_timeouts],
    )
