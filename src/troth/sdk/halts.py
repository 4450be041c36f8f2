"""The halt convention: why an execution halted, recorded where its callers can wait for it.

A halted execution settles nothing, so a caller waiting on its promise alone would wait for
ever. The run that halts a task (``troth.sdk.worker``) first records why, as a *halt
record*: the execution's child ``halt<n>`` (``order-7:halt1``; n counts halts, as a resumed
execution may halt again), resolved with the reason and the task version that halted. A
caller that waits on an execution (``troth.sdk.client.Waiter``) also waits on the record of
its next halt (creating it, pending, if need be; the halting run settles the first record
that is absent or pending), so a halt wakes it like a settlement would, in this process or
any other; it then reads the task (``task.get``) and raises ``HaltedError`` with the reason.
Once the execution settles, the caller cancels the record it waited on, which no halt will
settle now.

Like ``troth.sdk.cancellation``, this is a troth convention written on top of the protocol,
used by both sides: the worker, which writes the record, and the caller, which waits on it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from troth.protocol.conventions import SCOPE, halt_id
from troth.protocol.ids import origin
from troth.protocol.records import BRANCH, ORIGIN, PARENT, PromiseRecord, PromiseState, Value
from troth.protocol.requests import PromiseCreateRequest
from troth.sdk.codec import Codec


def halt_record(root: PromiseRecord, n: int) -> PromiseCreateRequest:
    """The (pending) record of the n-th halt of the execution whose promise is ``root``:
    created by a caller that waits for it or by the run that halts, settled by the latter.
    It has a branch of its own, so it is not preloaded into the execution's runs."""
    id = halt_id(root.id, n)
    tags = {
        SCOPE: "global",
        ORIGIN: root.tags.get(ORIGIN) or origin(root.id),
        PARENT: root.id,
        BRANCH: id,
    }
    return PromiseCreateRequest(id, root.timeout_at, Value(), tags)


async def halt_records(
    read: Callable[[str], Awaitable[PromiseRecord | None]], execution_id: str
) -> list[PromiseRecord]:
    """The settled halt records of an execution, in order; its next halt is recorded as
    number ``len + 1`` (the first record that is absent or still pending)."""
    found: list[PromiseRecord] = []
    while True:
        record = await read(halt_id(execution_id, len(found) + 1))
        if record is None or record.state == PromiseState.PENDING:
            return found
        found.append(record)


def halt_value(version: int, reason: str) -> dict[str, Any]:
    """What a halt record is resolved with: the task version that halted, and why."""
    return {"version": version, "reason": reason}


def halted_at(record: PromiseRecord, codec: Codec) -> tuple[int, str | None] | None:
    """The task version and reason a halt record holds; None if no halt settled it (its
    deadline passed first) or it cannot be read here (another app's encryption)."""
    if record.state != PromiseState.RESOLVED:
        return None
    try:
        data = codec.decode(record.value)
    except Exception:
        return None
    if not isinstance(data, dict) or not isinstance(version := data.get("version"), int):
        return None
    reason = data.get("reason")
    return version, reason if isinstance(reason, str) else None
