"""troth's queues on the wire: the tags that put an execution in a queue, and the kinds that
declare and read queues (``queue.set``, ``queue.get``, ``queue.search``).

A queue is a protocol extension of troth's own, as ``task.fences`` is (docs/queues.md).
A promise without ``troth:queue`` behaves exactly as the Lean machine says; one with it is
offered to its target only once its queue has room (``troth.engine.queues``). The official
SDKs never write the tag, so their requests keep the machine's exact answers.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from troth.protocol.records import DELAY, MAX_MILLIS, TARGET, Duration, NonEmpty, Record
from troth.protocol.requests import Data

QUEUE_TAG = "troth:queue"
"""On an execution's root promise: the name of the queue it waits in before it runs."""

QUEUE_KEY_TAG = "troth:queue-key"
"""The key within the queue (a customer, a tenant): keys are limited and served apart.
Without it, the execution has the empty key."""

PRIORITY_TAG = "troth:priority"
"""An integer: in a queue declared with ``priority``, a lower number runs first."""

DEBOUNCE_TAG = "troth:debounce"
"""A window in ms: the execution waits it out before it queues, and a later start of the
same queue and key within it supersedes this one (``troth.engine.debounce``)."""

DEBOUNCED_HEADER = "troth:debounced-into"
"""On the value of a superseded debounced start (resolved, no data): the id of the start
that superseded it, whose result is its result."""

MAX_NAME_BYTES = 512
MAX_KEY_BYTES = 512
MAX_PRIORITY = 2**31 - 1

Positive = Annotated[int, msgspec.Meta(ge=1, le=2**31 - 1)]


class Rate(Record):
    """At most ``limit`` starts in any ``period`` ms (a sliding window, never a burst over)."""

    limit: Positive
    period: Duration


class QueueSpec(Record):
    """A queue's declaration; an absent limit is no limit."""

    name: NonEmpty
    concurrency: Positive | None = None
    key_concurrency: Positive | None = None
    rate: Rate | None = None
    key_rate: Rate | None = None
    priority: bool = False


class QueueKeyStats(Record):
    """One key of a queue as it stands: executions holding a slot, waiting, and until when
    its own rate holds it back (``limitedUntil``, epoch ms; absent when it does not)."""

    key: str
    running: int
    waiting: int
    limited_until: int | None = None


class QueueRecord(Record):
    """A queue's declaration and how it stands now. ``running`` counts the executions that
    hold a slot (offered to a worker or running), ``waiting`` those queued for one;
    ``limitedUntil`` is when the queue-wide rate next lets one start, while it holds them
    back; ``keys`` lists the busiest keys (a ``queue.get`` only)."""

    spec: QueueSpec
    running: int
    waiting: int
    keys: list[QueueKeyStats]
    limited_until: int | None = None


# -- requests and responses -------------------------------------------------------------------


class QueueSetRequest(Data):
    """Declare a queue, or change its limits (what is running keeps running)."""

    queue: QueueSpec


class QueueGetRequest(Data):
    """A queue; with ``task`` (a task's id), also where that task stands in it."""

    name: NonEmpty
    task: NonEmpty | None = None


class QueueSearchRequest(Data):
    limit: int | None = None
    cursor: str | None = None


class QueueEntryRecord(Record):
    """Where a task stands in its queue (a ``queue.get`` with ``task``): its key and
    priority, whether it holds a slot, and while it waits its ``position``, 1-based, in its
    key's line (by priority, then arrival; absent once admitted)."""

    key: str
    priority: int
    admitted: bool
    position: int | None = None


class QueueResponse(Record):
    """``entry`` answers a ``queue.get`` with ``task``, when that task is in the queue."""

    queue: QueueRecord
    entry: QueueEntryRecord | None = None


class QueueSearchResponse(Record):
    queues: list[QueueRecord]
    cursor: str | None = None


# -- validation -------------------------------------------------------------------------------


def name_errors(field: str, name: str) -> list[str]:
    if len(name.encode()) > MAX_NAME_BYTES:
        return [f"{field} is over {MAX_NAME_BYTES} bytes"]
    return []


def queue_set(req: QueueSetRequest) -> list[str]:
    return name_errors("queue.name", req.queue.name)


def queue_get(req: QueueGetRequest) -> list[str]:
    return name_errors("name", req.name) + (
        name_errors("task", req.task) if req.task is not None else []
    )


def tag_errors(field: str, tags: dict[str, str]) -> list[str]:
    """The queue tags of a promise to create (``field`` names its tags), checked as
    ``promise.create`` checks its own."""
    errors: list[str] = []
    if QUEUE_TAG in tags:
        name = tags[QUEUE_TAG]
        errors += (
            name_errors(f"{QUEUE_TAG} in {field}", name)
            if name
            else [f"{QUEUE_TAG} in {field} must name a queue"]
        )
        if TARGET not in tags:
            errors.append(f"{QUEUE_TAG} in {field} needs a {TARGET}: a queue offers executions")
    elif QUEUE_KEY_TAG in tags or PRIORITY_TAG in tags:
        errors.append(f"{QUEUE_KEY_TAG} and {PRIORITY_TAG} in {field} need a {QUEUE_TAG}")
    key = tags.get(QUEUE_KEY_TAG)
    if key is not None and len(key.encode()) > MAX_KEY_BYTES:
        errors.append(f"{QUEUE_KEY_TAG} in {field} is over {MAX_KEY_BYTES} bytes")
    priority = tags.get(PRIORITY_TAG)
    if priority is not None and not _is_priority(priority):
        errors.append(f"{PRIORITY_TAG} in {field} must be an integer from 0 to {MAX_PRIORITY}")
    debounce = tags.get(DEBOUNCE_TAG)
    if debounce is not None:
        if QUEUE_TAG not in tags:
            errors.append(f"{DEBOUNCE_TAG} in {field} needs a {QUEUE_TAG}")
        if DELAY in tags:
            errors.append(f"{DEBOUNCE_TAG} and {DELAY} in {field} exclude each other")
        if not (debounce.isascii() and debounce.isdigit() and 1 <= int(debounce) <= MAX_MILLIS):
            errors.append(f"{DEBOUNCE_TAG} in {field} must be a window of 1 to {MAX_MILLIS} ms")
    return errors


def _is_priority(text: str) -> bool:
    return text.isascii() and text.isdigit() and int(text) <= MAX_PRIORITY


QUEUED_BY_PROMISE_CREATE = (
    "a queued execution is created with promise.create (and a resonate:target): its queue "
    "decides when it runs, so task.create cannot hand it over already held"
)
