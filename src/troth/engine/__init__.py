"""troth.engine: the Lean abstract machine, written once against the ``Store`` effects.

Every request kind has one handler ``(store, request, now) -> Reply`` (``promises``,
``tasks``, ``schedules``; the extensions in ``search`` and ``preload``); the settlement
chain lives in ``settlement`` and the four internal transitions in ``timeouts``. Nothing
here reads a clock or does I/O: a backend opens a transaction, passes a ``Store`` over it
and commits what the handler did.
"""

from troth.engine.dispatch import HANDLERS, READ_ONLY, handle
from troth.engine.store import (
    OutboxKey,
    Store,
    Task,
    TaskTimeoutKind,
    Timeout,
    TimeoutKind,
    outbox_key,
)
from troth.engine.timeouts import fire

__all__ = [
    "HANDLERS",
    "READ_ONLY",
    "OutboxKey",
    "Store",
    "Task",
    "TaskTimeoutKind",
    "Timeout",
    "TimeoutKind",
    "fire",
    "handle",
    "outbox_key",
]
