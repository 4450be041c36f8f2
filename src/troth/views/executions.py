"""The executions list: which promises are executions, the query over them, a page.

An execution is a promise with a task that is the root of its call tree (no
``resonate:parent``, or its own id as troth writes it); its children with tasks (rpc,
detached) are in its tree, not in the list. Pages are newest first; a cursor is the last
row's creation instant and id, so a page is read along the index from where the last one
stopped, however deep it is (``troth.storage.views``).

``ExecutionQuery.parse`` reads the API's query parameters (the CLI's flags are the same
names), and every error names the parameter.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from troth.protocol.conventions import FUNC_TAG
from troth.protocol.records import PromiseRecord, PromiseState, TaskState
from troth.views.values import shown

HALTED = "halted"
STATES = (*(s.value for s in PromiseState), HALTED)
"""What ``state`` filters by: a promise state, or ``halted`` (the task stopped for an
operator, its promise still pending)."""

DEFAULT_LIMIT = 50
MAX_LIMIT = 1000


class QueryError(ValueError):
    """A bad query parameter; ``field`` names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class Cursor(NamedTuple):
    """Where a page stopped: the last row's creation instant and id (rows are ordered by
    both, descending)."""

    created_on: int
    id: str

    def __str__(self) -> str:
        return f"{self.created_on}.{self.id}"

    @classmethod
    def parse(cls, text: str) -> Cursor:
        at, dot, id = text.partition(".")
        if not (dot and at.isdigit() and id):
            raise QueryError("cursor", f"not a cursor this server wrote: {text!r}")
        return cls(int(at), id)


@dataclass(frozen=True)
class ExecutionQuery:
    """Which executions, newest first: all filters must hold. ``since_ms``/``until_ms``
    bound the creation instant (``since`` included, ``until`` not)."""

    state: str | None = None
    function: str | None = None
    tag: tuple[str, str] | None = None
    since_ms: int | None = None
    until_ms: int | None = None
    cursor: Cursor | None = None
    limit: int = DEFAULT_LIMIT

    @classmethod
    def parse(cls, params: Mapping[str, str]) -> ExecutionQuery:
        """The query of the API's parameters (``state``, ``function``, ``tag=key:value``,
        ``since``, ``until`` in ms, ``cursor``, ``limit``); ``QueryError`` names a bad one."""
        unknown = sorted(
            set(params) - {"state", "function", "tag", "since", "until", "cursor", "limit"}
        )
        if unknown:
            raise QueryError(unknown[0], "unknown parameter")
        state = params.get("state") or None
        if state is not None and state not in STATES:
            raise QueryError("state", f"{state!r} is not one of {', '.join(STATES)}")
        tag = None
        if params.get("tag"):
            key, colon, value = params["tag"].partition(":")
            if not (colon and key):
                raise QueryError("tag", f"expected key:value, got {params['tag']!r}")
            tag = (key, value)
        cursor = Cursor.parse(params["cursor"]) if params.get("cursor") else None
        limit = _integer(params, "limit", DEFAULT_LIMIT)
        if not 1 <= limit <= MAX_LIMIT:
            raise QueryError("limit", f"must be between 1 and {MAX_LIMIT}, got {limit}")
        return cls(
            state=state,
            function=params.get("function") or None,
            tag=tag,
            since_ms=_integer(params, "since", None),
            until_ms=_integer(params, "until", None),
            cursor=cursor,
            limit=limit,
        )

    def params(self) -> dict[str, str]:
        """The API's parameters for this query (``parse`` reads them back)."""
        given: dict[str, Any] = {
            "state": self.state,
            "function": self.function,
            "tag": f"{self.tag[0]}:{self.tag[1]}" if self.tag else None,
            "since": self.since_ms,
            "until": self.until_ms,
            "cursor": self.cursor,
            "limit": self.limit,
        }
        return {key: str(value) for key, value in given.items() if value is not None}


def _integer(params: Mapping[str, str], name: str, default: int | None) -> Any:
    text = params.get(name)
    if not text:
        return default
    if not text.isdigit():
        raise QueryError(name, f"expected a whole number, got {text!r}")
    return int(text)


@dataclass(frozen=True)
class Execution:
    """One row of the list. ``state`` is the promise's, or ``halted``."""

    id: str
    function: str | None
    state: str
    task: TaskState | None
    created_on: int
    settled_on: int | None

    @classmethod
    def of(cls, promise: PromiseRecord, task: TaskState | None) -> Execution:
        return cls(
            id=promise.id,
            function=function_of(promise),
            state=HALTED if task == TaskState.HALTED else promise.state.value,
            task=task,
            created_on=promise.created_at,
            settled_on=promise.settled_at,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "function": self.function,
            "state": self.state,
            "task": self.task.value if self.task is not None else None,
            "created_on": self.created_on,
            "settled_on": self.settled_on,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Execution:
        task = data.get("task")
        return cls(
            id=data["id"],
            function=data.get("function"),
            state=data["state"],
            task=TaskState(task) if task is not None else None,
            created_on=data["created_on"],
            settled_on=data.get("settled_on"),
        )


def function_of(promise: PromiseRecord) -> str | None:
    """The function an execution runs: troth's tag, else the invocation's ``func`` (what
    every SDK's invocation param holds)."""
    name = promise.tags.get(FUNC_TAG)
    if name is not None:
        return name
    param = shown(promise.param)
    func = param.data.get("func") if param.decoded and isinstance(param.data, dict) else None
    return func if isinstance(func, str) else None


class Page(NamedTuple):
    """A page of executions and the cursor of the next (None on the last)."""

    executions: list[Execution]
    next: Cursor | None
