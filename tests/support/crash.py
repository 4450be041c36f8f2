"""What a storage backend must show after its writer was killed mid-run.

The crash tests run a child process that hammers a service with create -> listen -> fulfil
sequences and prints each acknowledged step, then SIGKILL it; on reopening, the snapshot
must hold every acknowledged write and only whole requests.
"""

from __future__ import annotations

from troth.protocol.responses import Snapshot


def assert_survived(snap: Snapshot, acked: list[tuple[str, ...]]) -> None:
    promises = {p.id: p for p in snap.promises}
    tasks = {t.id: t for t in snap.tasks}
    listeners = {entry.id for entry in snap.listeners}
    promise_timeouts = {t.id for t in snap.promise_timeouts}
    leases = {t.id for t in snap.task_timeouts if t.type == 1}
    unblocked = {m.message.data.promise.id for m in snap.messages}

    for step, id in acked:
        assert id in promises, f"acknowledged {step} of {id} was lost"
        if step == "listened":
            assert id in listeners or promises[id].state == "resolved"
        if step == "fulfilled":
            assert promises[id].state == "resolved"

    # Each request either happened in full or not at all: only these shapes exist.
    for id, promise in promises.items():
        task = tasks[id]
        if promise.state == "pending":
            assert (task.state, task.version, task.pid) == ("acquired", 1, "hammer")
            assert id in promise_timeouts and id in leases and id not in unblocked
        else:
            assert promise.state == "resolved" and promise.value.data == id
            assert task.state == "fulfilled"
            assert id not in promise_timeouts and id not in leases and id not in listeners
            assert id in unblocked
    assert set(tasks) == set(promises)
