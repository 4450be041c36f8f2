"""Is a concurrent history explained by some sequential run of the oracle?

A Wing & Gong search with Lowe's memoisation, as porcupine does it: the history becomes a
list of call and return events in time order; the search walks it, linearizing any call
whose response a copy of the oracle reproduces, and backtracks when it meets the return of
an operation it has not linearized yet (that operation would have to come later than it
returned). A set of (linearized operations, oracle state) pairs already explored cuts the
search from factorial to roughly the number of distinct states.

Time. Every request carries ``resonate:debug_time``, so each operation brings its own
``now``; the oracle replays it with that ``now``. The recorder (``history``) keeps ``now``
from going backwards along real-time order: a phase's operations share one ``now``, and the
``debug.tick`` between phases runs while nothing is in flight. So any order the search may
choose (one consistent with real time) sees ``now`` non-decreasing, except for operations
whose outcome is unknown, which a server may apply late, but still at their own ``now``.

Unknown outcomes. A 500 or 503 (or no response at all) may or may not have taken effect: the
operation returns "at infinity" and accepts any response. "Never took effect" is the same
as taking effect after everything else, so the search needs no separate case for it.

Partitions. Resonate's doors keep every multi-object request inside one origin (as
``troth.protocol.ids.origin`` reads it, which the doors use too), and a timeout's consequences
stay in its origin, so the history is checked one origin at a time; a ``debug.tick``
belongs to every origin. A request that names ids of two origins is refused
(``ValueError``): splitting it would be unsound.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import msgspec

from troth.oracle import Oracle
from troth.oracle.state import ServerState
from troth.protocol import BadRequest, Request, decode_request, response_envelope, to_builtins
from troth.protocol.ids import origin

Envelope = dict[str, Any]
UNKNOWN = (500, 503)  # infrastructure failures: the operation may or may not have happened
TICK = "debug.tick"


@dataclass(frozen=True)
class Operation:
    """One request as a client saw it: sent at ``call``, answered at ``ret`` (ns).

    ``response`` is None when none arrived (``ret`` is then None too).
    """

    client: int
    call: int
    ret: int | None
    request: Envelope
    response: Envelope | None

    @property
    def known(self) -> bool:
        """Whether the response says what happened (a 500/503 or silence does not)."""
        return self.response is not None and self.response["head"]["status"] not in UNKNOWN

    @property
    def kind(self) -> str:
        return self.request["kind"]


def observable(response: Envelope) -> tuple[Any, ...]:
    """What must match: kind, status, and the body, except an error's message string."""
    status = response["head"]["status"]
    return response["kind"], status, response["data"] if status < 400 else None


# -- the model: the oracle, restartable from any state -------------------------------------


TABLES = ("promises", "tasks", "schedules", "promise_timeouts", "task_timeouts",
          "schedule_timeouts", "outbox")  # fmt: skip
Fingerprint = tuple[tuple[str, ...], ...]


class Model:
    """The oracle as a memoised function ``(state, operation) -> (state', response)``.

    States are interned: each distinct state (``fingerprint``) gets a small number, so the
    search's cache and this memo key on ints, and a step the search retries after
    backtracking (it retries the same operations from the same states a lot) is a lookup.
    The oracle's objects are frozen, so a ``ServerState`` whose lists are copied is a full,
    cheap snapshot, and a table whose rows are the very same objects is unchanged.
    """

    def __init__(self, retry_timeout: int) -> None:
        self.oracle = Oracle(retry_timeout)
        self._states: list[ServerState] = []
        self._prints: list[Fingerprint] = []
        self._numbers: dict[Fingerprint, int] = {}
        self._steps: dict[tuple[int, int], tuple[Any, int]] = {}
        # repr of each row object met, keyed by id; the row is kept so its id stays unique.
        self._reprs: dict[int, tuple[object, str]] = {}

    def initial(self) -> int:
        return self._intern(clone(self.oracle.state), None)

    def step(self, number: int, op: int, request: Request | BadRequest) -> tuple[Any, int]:
        """The response to ``request`` (operation ``op``) in state ``number``, and the state
        after it."""
        done = self._steps.get((number, op))
        if done is not None:
            return done
        if isinstance(request, BadRequest):
            reply, kind = request.reply(), request.kind
            response = to_builtins(response_envelope(kind, request.corr_id, reply))
            done = observable(response), number
        else:
            self.oracle.state = clone(self._states[number])
            reply = self.oracle.handle(request)
            response = to_builtins(response_envelope(request.kind, request.corr_id, reply))
            done = observable(response), self._intern(self.oracle.state, number)
        self._steps[number, op] = done
        return done

    def _intern(self, state: ServerState, before: int | None) -> int:
        fingerprint = self._fingerprint(state, before)
        number = self._numbers.get(fingerprint)
        if number is None:
            number = self._numbers[fingerprint] = len(self._states)
            self._states.append(state)
            self._prints.append(fingerprint)
        return number

    def _fingerprint(self, state: ServerState, before: int | None) -> Fingerprint:
        """The state up to the order of its lists, which no response depends on (lookups are
        by key; search, preload and tick sort), so two orders reaching the same rows meet.
        Tables whose rows are those of state ``before`` reuse its fingerprint."""
        parts = []
        for n, table in enumerate(TABLES):
            rows = getattr(state, table)
            if before is not None and _same_rows(rows, getattr(self._states[before], table)):
                parts.append(self._prints[before][n])
            else:
                parts.append(tuple(sorted(map(self._repr, rows))))
        return tuple(parts)

    def _repr(self, row: object) -> str:
        cached = self._reprs.get(id(row))
        if cached is None:
            cached = self._reprs[id(row)] = (row, repr(row))
        return cached[1]


def _same_rows(a: list[Any], b: list[Any]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def clone(state: ServerState) -> ServerState:
    twin = copy.copy(state)
    for table in TABLES:
        setattr(twin, table, list(getattr(state, table)))
    return twin


# -- partitions ----------------------------------------------------------------------------


def ids_named(data: Any) -> Iterator[str]:
    """Every object id a request's data names, nested actions included."""
    if isinstance(data, dict):
        for key, value in data.items():
            if key in ("id", "awaited", "awaiter") and isinstance(value, str):
                yield value
            elif key in ("data", "action", "actions", "tasks"):
                yield from ids_named(value)
    elif isinstance(data, list):
        for item in data:
            yield from ids_named(item)


def partition(history: Iterable[Operation]) -> dict[str, list[Operation]]:
    """The history split by origin; ticks go to every part."""
    parts: dict[str, list[Operation]] = {}
    ticks: list[Operation] = []
    for op in history:
        if op.kind == TICK:
            ticks.append(op)
            continue
        origins = {origin(i) for i in ids_named(op.request["data"])}
        if len(origins) != 1:
            raise ValueError(f"cannot partition {op.kind} naming origins {sorted(origins)}")
        parts.setdefault(origins.pop(), []).append(op)
    return {name: [*ops, *ticks] for name, ops in parts.items()} if parts else {"": ticks}


# -- the search ----------------------------------------------------------------------------


@dataclass
class Verdict:
    ok: bool
    order: list[Operation] = field(default_factory=list)  # a witness, or the longest prefix
    stuck: list[Operation] = field(default_factory=list)  # what could not follow the prefix
    origin: str = ""
    explored: int = 0

    def explain(self) -> str:
        if self.ok:
            return f"linearizable ({self.explored} states explored)"
        lines = [f"not linearizable (origin {self.origin!r}); longest prefix:"]
        lines += [f"  {describe(op)}" for op in self.order]
        lines.append("none of these can come next:")
        lines += [f"  {describe(op)}" for op in self.stuck]
        return "\n".join(lines)


def describe(op: Operation) -> str:
    response = op.response
    answer = "no answer" if response is None else (response["head"]["status"], response["data"])
    now = op.request["head"].get("resonate:debug_time")
    return f"c{op.client} @{now} {op.kind} {op.request['data']} -> {answer}"


class _Node:
    """An event in the doubly linked list the search lifts operations out of."""

    __slots__ = ("index", "is_call", "match", "next", "prev")

    def __init__(self, index: int, is_call: bool) -> None:
        self.index = index
        self.is_call = is_call
        self.match: _Node | None = None  # a call's return event
        self.prev: _Node | None = None
        self.next: _Node | None = None


def _events(ops: list[Operation]) -> _Node:
    """The head sentinel of call/return events in time order; at equal times calls first, so
    touching intervals count as overlapping (the permissive, sound choice)."""
    events: list[tuple[float, int, int]] = []
    for i, op in enumerate(ops):
        ret = op.ret if op.known and op.ret is not None else math.inf
        events += [(op.call, 0, i), (ret, 1, i)]
    events.sort()
    head = _Node(-1, False)
    calls: dict[int, _Node] = {}
    last = head
    for _, kind, i in events:
        node = _Node(i, kind == 0)
        if node.is_call:
            calls[i] = node
        else:
            calls[i].match = node
        last.next, node.prev = node, last
        last = node
    return head


def _lift(call: _Node) -> None:
    for node in (call, call.match):
        assert node is not None and node.prev is not None
        node.prev.next = node.next
        if node.next is not None:
            node.next.prev = node.prev


def _unlift(call: _Node) -> None:
    for node in (call.match, call):
        assert node is not None and node.prev is not None
        node.prev.next = node
        if node.next is not None:
            node.next.prev = node


class Inconclusive(Exception):
    """The search met more states than it was allowed to: neither verdict was reached."""


def check_partition(ops: list[Operation], retry_timeout: int, limit: int) -> Verdict:
    model = Model(retry_timeout)
    requests = [decoded(op.request) for op in ops]
    expected = [observable(op.response) if op.known and op.response else None for op in ops]
    head = _events(ops)
    state = model.initial()
    done = 0  # bitset of linearized operations
    seen: set[tuple[int, int]] = set()  # (done, state) pairs already explored
    stack: list[tuple[_Node, int]] = []
    longest: list[int] = []
    node = head.next
    while head.next is not None:
        assert node is not None
        if node.is_call:
            answer, after = model.step(state, node.index, requests[node.index])
            if expected[node.index] is None or answer == expected[node.index]:
                key = (done | 1 << node.index, after)
                if key not in seen:
                    if len(seen) >= limit:
                        raise Inconclusive(f"more than {limit} states for {len(ops)} operations")
                    seen.add(key)
                    stack.append((node, state))
                    done, state = key
                    _lift(node)
                    if len(stack) > len(longest):
                        longest = [n.index for n, _ in stack]
                    node = head.next
                    continue
            node = node.next
        else:
            # The return of an operation not yet linearized: everything before it is spent.
            if not stack:
                order = [ops[i] for i in longest]
                return Verdict(False, order, _next_candidates(ops, longest), explored=len(seen))
            call, state = stack.pop()
            done &= ~(1 << call.index)
            _unlift(call)
            node = call.next
    return Verdict(True, [ops[n.index] for n, _ in stack], explored=len(seen))


def _next_candidates(ops: list[Operation], prefix: list[int]) -> list[Operation]:
    """The operations that real time allowed after ``prefix`` (for the failure report)."""
    placed = set(prefix)
    rest = [i for i in range(len(ops)) if i not in placed]
    first_return = min(
        (ops[i].ret for i in rest if ops[i].known and ops[i].ret is not None), default=math.inf
    )
    return [ops[i] for i in rest if ops[i].call <= first_return]


def decoded(envelope: Envelope) -> Request | BadRequest:
    try:
        return decode_request(msgspec.json.encode(envelope))
    except BadRequest as e:
        return e


def check(history: list[Operation], retry_timeout: int, limit: int = 1_000_000) -> Verdict:
    """Linearizable iff every origin's part is; the first failing part's verdict otherwise.

    ``limit`` bounds the states explored per origin (memory grows with them); past it the
    search raises ``Inconclusive`` rather than answer either way."""
    explored = 0
    order: list[Operation] = []
    for name, ops in sorted(partition(history).items()):
        verdict = check_partition(ops, retry_timeout, limit)
        verdict.origin = name
        if not verdict.ok:
            return verdict
        explored += verdict.explored
        order += verdict.order
    return Verdict(True, order, explored=explored)
