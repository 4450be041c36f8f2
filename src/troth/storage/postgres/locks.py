"""Object locks: how concurrent transactions on one database keep out of each other's way.

The rule, which makes every handler's read-then-write atomic without re-implementing it:

    A write transaction takes the object lock of an id before its first read of that object,
    and holds it until it commits or rolls back.

An *object* is what the machine keys by one id: a promise together with its task, its
callbacks and listeners (as the awaited promise), its timeouts and its execute message; or a
schedule with its timeout. The lock is a transaction-scoped advisory lock on a 64-bit key
derived from (namespace, id). Unlike ``SELECT ... FOR UPDATE`` it also covers ids with no
row yet, so two concurrent creates of one id serialize instead of both inserting, and a
promise and its task (two tables) are one lock, so there is no lock order between them.

Transactions run at READ COMMITTED: every statement sees what was committed before it
started, and the store reads an object only in a statement issued after its lock was
granted, so the read is the latest committed state and nobody can change it before the
transaction ends. Two objects locked in opposite orders by two transactions deadlock;
PostgreSQL detects it, aborts one, and the service retries that one.

A hash collision between two ids only makes their transactions wait for each other.
"""

from __future__ import annotations

import enum
import hashlib


class Namespace(enum.Enum):
    PROMISE = b"p"  # a promise and its task share their id
    SCHEDULE = b"s"
    QUEUE = b"q"  # a queue with its keys, its line of entries and its log of starts


def key(namespace: Namespace, id: str) -> int:
    """The signed 64-bit advisory lock key of an object."""
    digest = hashlib.blake2b(namespace.value + id.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


LOCK = "SELECT pg_advisory_xact_lock(%s)"
TRY_LOCK = "SELECT pg_try_advisory_xact_lock(%s)"
