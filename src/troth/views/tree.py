"""An execution's call tree, from its promises.

Every promise of an execution shares its origin (``resonate:origin``) and names its
parent (``resonate:parent``), whichever SDK wrote it; troth's own tags
(``troth.protocol.conventions``) add what each promise was for, so a node says whether it
is a step, an rpc child, a sleep, a failed attempt, a halt or a cancellation. Promises of
the official SDKs carry no such tag and are read by theirs: a timer is a sleep, a promise
with a target is an rpc, a ``local`` one a step.

``build`` is one pass over the records (a 1,000-node tree builds in milliseconds); it
never fails on what it finds: a promise whose parent is missing hangs under the root.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from troth.protocol.conventions import ATTEMPT_TAG, CANCEL_TAG, SCOPE, STALLED_HEADER, STEP_TAG
from troth.protocol.ids import LINEAGE_SEP, ORIGIN_SEP
from troth.protocol.queues import QUEUE_TAG, QueueGetRequest, QueueResponse
from troth.protocol.records import PARENT, TARGET, PromiseRecord, PromiseState, TaskState
from troth.protocol.responses import Reply
from troth.views.executions import function_of
from troth.views.values import Shown, error_text, shown

_HALT = re.compile(r"halt\d+")
_SEGMENT = re.compile(r"(\d+)|(\D+)")


@dataclass(frozen=True)
class Queued:
    """Where a queued execution waits for a slot: its queue, its key, and its 1-based
    place in that key's line (docs/queues.md, "Seeing queues")."""

    queue: str
    key: str
    position: int

    def text(self) -> str:
        key = repr(self.key) if self.key else "the empty key"
        return f"queued (position {self.position}, waiting for key {key})"


@dataclass(frozen=True)
class Node:
    """One promise of the tree. ``kind`` is what it was created for: ``root``, ``run`` (a
    step), ``rpc``, ``detached``, ``sleep``, ``promise`` (an awaited promise), ``attempt``
    (a step's failed attempt), ``halt``, ``cancel``, or a recorded ``now``, ``random`` or
    ``uuid``. Times are ms since the epoch; ``attempts`` counts a step's attempts so far
    (None where nothing is attempted); ``last_error`` is the error it was rejected with, or
    its latest failed attempt's while it is retried; ``stalled_ms`` is the longest time its
    code blocked the event loop, when it did (a warning: ``troth.sdk.stalls``); ``queued``
    where it waits in its queue, when the reader asked (``queue_question``)."""

    id: str
    kind: str
    function: str | None
    state: PromiseState
    created_on: int
    settled_on: int | None
    duration_ms: int | None
    attempts: int | None
    last_error: str | None
    param: Shown
    value: Shown
    task: TaskState | None = None
    stalled_ms: int | None = None
    tags: dict[str, str] = field(default_factory=dict)
    children: tuple[Node, ...] = ()
    queued: Queued | None = None

    def walk(self) -> Iterable[Node]:
        """This node and every node below it, depth first."""
        yield self
        for child in self.children:
            yield from child.walk()


def build(
    root_id: str, records: Iterable[PromiseRecord], tasks: dict[str, TaskState] | None = None
) -> Node:
    """The tree of ``root_id`` from the records of its promises (in any order; those not
    below ``root_id`` are left out). ``tasks`` gives the state of the promises' tasks.
    ``KeyError`` if ``root_id`` is not among the records."""
    tasks = tasks or {}
    by_id = {r.id: r for r in records if not _unasked_cancel(r)}
    root = by_id[root_id]
    below: dict[str, list[PromiseRecord]] = {}
    for record in by_id.values():
        if record.id != root_id and _descends(record.id, root_id):
            below.setdefault(_parent(record, by_id, root_id), []).append(record)
    return _node(root, root_id, below, tasks)


def _node(
    record: PromiseRecord,
    root_id: str,
    below: dict[str, list[PromiseRecord]],
    tasks: dict[str, TaskState],
) -> Node:
    children = tuple(
        _node(child, root_id, below, tasks)
        for child in sorted(below.get(record.id, []), key=_order)
    )
    kind = "root" if record.id == root_id else _kind(record)
    param, value = shown(record.param), shown(record.value)
    failed = [c for c in children if c.kind == "attempt"]
    attempts = len(failed) + 1 if kind == "run" else None
    error = _error(record, value)
    if error is None and record.state == PromiseState.PENDING:
        # The newest attempt record may still be pending: it is created, then rejected.
        error = next((a.last_error for a in reversed(failed) if a.last_error), None)
    settled = record.settled_at
    return Node(
        id=record.id,
        kind=kind,
        function=_function(record, kind),
        state=record.state,
        created_on=record.created_at,
        settled_on=settled,
        duration_ms=None if settled is None else max(0, settled - record.created_at),
        attempts=attempts,
        last_error=error,
        param=param,
        value=value,
        task=tasks.get(record.id),
        stalled_ms=_stalled_ms(record),
        tags=dict(record.tags),
        children=children,
    )


def queue_question(node: Node) -> QueueGetRequest | None:
    """The ``queue.get`` that says where ``node`` waits, if it may be waiting in a queue:
    a pending promise in a queue whose task is pending (not yet offered, or offered)."""
    name = node.tags.get(QUEUE_TAG)
    if name is None or node.state != PromiseState.PENDING or node.task != TaskState.PENDING:
        return None
    return QueueGetRequest(name, task=node.id)


def with_queue(node: Node, reply: Reply) -> Node:
    """``node`` with where it waits, from the answer to its ``queue_question``: unchanged
    unless it waits in the line (an admitted task is offered, no longer queued)."""
    body = reply.body
    if reply.status != 200 or not isinstance(body, QueueResponse) or body.entry is None:
        return node
    entry = body.entry
    if entry.admitted or entry.position is None:
        return node
    return replace(node, queued=Queued(body.queue.spec.name, entry.key, entry.position))


def _stalled_ms(record: PromiseRecord) -> int | None:
    stalled = (record.value.headers or {}).get(STALLED_HEADER, "")
    return int(stalled) if stalled.isdigit() else None


def _unasked_cancel(record: PromiseRecord) -> bool:
    """An execution's cancel promise is bookkeeping until someone resolves it: pending, it
    waits for a request; rejected_canceled, it was closed unasked when the execution ended.
    Shown, it would read as a cancellation (or an error) that never happened."""
    return CANCEL_TAG in record.tags and record.state != PromiseState.RESOLVED


def _kind(record: PromiseRecord) -> str:
    tags = record.tags
    step = tags.get(STEP_TAG)
    if step is not None:
        return step.partition(":")[0]
    if ATTEMPT_TAG in tags:
        return "attempt"
    if CANCEL_TAG in tags:
        return "cancel"
    if _HALT.fullmatch(_last_segment(record.id)):
        return "halt"
    # The official SDKs' children: a timer, an rpc (it has a target), a local step.
    if tags.get("resonate:timer") == "true":
        return "sleep"
    if TARGET in tags:
        return "rpc"
    if tags.get(SCOPE) == "local":
        return "run"
    return "promise"


def _function(record: PromiseRecord, kind: str) -> str | None:
    _, _, name = record.tags.get(STEP_TAG, "").partition(":")
    if name:
        return name
    return function_of(record) if kind in ("root", "rpc", "detached") else None


def _error(record: PromiseRecord, value: Shown) -> str | None:
    if record.state in (PromiseState.PENDING, PromiseState.RESOLVED):
        return None
    if record.state == PromiseState.REJECTED_TIMEDOUT:
        return "timed out"
    text = error_text(value.data) if value.decoded else None
    if text is not None:
        return text
    if value.decoded and value.data is not None:
        return str(value.data)
    return "canceled" if record.state == PromiseState.REJECTED_CANCELED else "rejected"


def _parent(record: PromiseRecord, by_id: dict[str, PromiseRecord], root_id: str) -> str:
    """The nearest ancestor present: the parent tag's, else the id's lineage."""
    tagged = record.tags.get(PARENT)
    if tagged is not None and tagged != record.id and tagged in by_id:
        return tagged
    id = record.id
    while id != root_id:
        cut = max(id.rfind(LINEAGE_SEP), id.rfind(ORIGIN_SEP))
        if cut < 0:
            break
        id = id[:cut]
        if id in by_id:
            return id
    return root_id


def _descends(id: str, ancestor: str) -> bool:
    return id.startswith((ancestor + ORIGIN_SEP, ancestor + LINEAGE_SEP))


def _last_segment(id: str) -> str:
    return id[max(id.rfind(LINEAGE_SEP), id.rfind(ORIGIN_SEP)) + 1 :]


def _order(record: PromiseRecord) -> tuple[int, tuple[tuple[int, str], ...]]:
    """Creation order; ties by the id read naturally (``x.2`` before ``x.10``)."""
    natural = tuple(
        (int(digits), "") if digits else (-1, text)
        for digits, text in _SEGMENT.findall(_last_segment(record.id))
    )
    return record.created_at, natural


def to_json(node: Node) -> dict[str, Any]:
    """``node`` and its subtree as JSON (the API's shape; ``from_json`` reads it back)."""
    data: dict[str, Any] = {
        "id": node.id,
        "kind": node.kind,
        "function": node.function,
        "state": node.state.value,
        "task": node.task.value if node.task is not None else None,
        "created_on": node.created_on,
        "settled_on": node.settled_on,
        "duration_ms": node.duration_ms,
        "attempts": node.attempts,
        "last_error": node.last_error,
        "stalled_ms": node.stalled_ms,
        "param": node.param.to_json(),
        "value": node.value.to_json(),
        "tags": node.tags,
        "children": [to_json(child) for child in node.children],
    }
    if node.queued is not None:  # only when asked: the API's trees keep their shape
        q = node.queued
        data["queued"] = {"queue": q.queue, "key": q.key, "position": q.position}
    return data


def from_json(data: dict[str, Any]) -> Node:
    """The node ``to_json`` wrote (the CLI reads a remote server's trees with it)."""

    def value(shown: dict[str, Any]) -> Shown:
        return Shown(
            shown["decoded"], shown.get("data"), shown.get("headers", {}), shown.get("note")
        )

    task = data.get("task")
    queued = data.get("queued")
    return Node(
        id=data["id"],
        kind=data["kind"],
        function=data.get("function"),
        state=PromiseState(data["state"]),
        created_on=data["created_on"],
        settled_on=data.get("settled_on"),
        duration_ms=data.get("duration_ms"),
        attempts=data.get("attempts"),
        last_error=data.get("last_error"),
        param=value(data["param"]),
        value=value(data["value"]),
        task=TaskState(task) if task is not None else None,
        stalled_ms=data.get("stalled_ms"),
        tags=data.get("tags", {}),
        children=tuple(from_json(child) for child in data.get("children", [])),
        queued=Queued(**queued) if queued is not None else None,
    )
