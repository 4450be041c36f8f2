"""The machine behind the simulated wire: the oracle, judged after every step.

Requests arrive as the envelopes an HTTP server would read (encoded by the SDK's own
``encode_request``, with the virtual ``now`` as ``resonate:debug_time``) and answers leave
as response envelopes. After every request and every tick the state must satisfy every
state property and the step every transition property of ``troth.oracle.invariants``; a
violation stops the run there. The oracle keeps its outbox (Lean's keyed upsert), so the
messages a step sent are the entries it put there: new objects, found by identity.

Like ``troth serve``, the server refuses a request body over its limit with a 413 before
reading it (nothing changes). It can restart: while ``down`` it answers nothing and fires
no timeout; its state (the oracle's) survives, and ``epoch`` counts the restarts, so that
what was on the way over a connection of the old process can be told apart and lost.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import msgspec

from troth.oracle import Oracle
from troth.oracle.invariants import Violation, check_state, check_step
from troth.oracle.state import LEASE, OutboxEntry
from troth.protocol.envelope import BadRequest, decode_request, encode_request
from troth.protocol.records import PromiseState
from troth.protocol.requests import Data


class InvariantViolation(AssertionError):
    def __init__(self, step: str, violations: list[Violation]) -> None:
        listing = "\n".join(f"  {v.name} {v.ids}: {v.detail}" for v in violations)
        super().__init__(f"after {step}:\n{listing}")


class SimServer:
    def __init__(
        self,
        retry_timeout: int,
        order: Callable[[], int],
        body_limit: int,
        fences_extension: bool = True,
    ) -> None:
        self.oracle = Oracle(retry_timeout=retry_timeout)
        # False: a server without troth's ``task.fences``, answering it as an unknown kind
        # (the SDK falls back to one ``task.fence`` per write).
        self.fences_extension = fences_extension
        self.retry_timeout = retry_timeout
        self.body_limit = body_limit
        self.down = False
        self.epoch = 0
        self._order = order
        self._snap = self.oracle.snapshot()
        self.settled: dict[str, int] = {}  # promise id -> its settlement's place in the order
        self.created: dict[str, int] = {}  # promise id -> its creation's place in the order
        self.stats: Counter[str] = Counter()

    def request(
        self, kind: str, data: Data, corr_id: str, now: int
    ) -> tuple[dict[str, Any], list[OutboxEntry]]:
        assert not self.down, "a request reached a server that is down"
        body = encode_request(kind, data, corr_id, debug_time=now)
        if len(body) > self.body_limit:
            self.stats[f"{kind} 413"] += 1
            message = f"Request body too large: the limit is {self.body_limit} bytes"
            return {"head": {"corrId": corr_id, "status": 413}, "data": message}, []
        envelope = msgspec.json.decode(body)
        if kind == "task.fences" and not self.fences_extension:
            self.stats[f"{kind} unknown"] += 1
            head = {"corrId": corr_id, "status": 400, "version": envelope["head"]["version"]}
            return {"head": head, "data": f"Unknown operation: {kind}"}, []
        outbox = self.oracle.state.outbox
        if kind == "task.fences":
            response = self._fences(envelope, now)
        else:
            response = self.oracle.apply(envelope)
            self._judge(lambda: f"{kind} {msgspec.json.encode(envelope).decode()}", now)
        self.stats[f"{kind} {response['head']['status']}"] += 1
        return response, _new(outbox, self.oracle.state.outbox)

    def _fences(self, envelope: dict[str, Any], now: int) -> dict[str, Any]:
        """``task.fences`` as it is defined: the standard ``task.fence`` of each action, in
        order, at one instant, each judged as the Lean step it is (the catalogue's
        properties are of single steps: a batch creates and settles a promise "at once"
        only as two steps), answered together with no preload."""
        head, data = envelope["head"], envelope["data"]
        try:
            decode_request(msgspec.json.encode(envelope))
        except BadRequest:
            return self.oracle.apply(envelope)  # refused whole, as the server refuses it
        fences = []
        for action in data["actions"]:
            fence = {"id": data["id"], "version": data["version"], "action": action}
            single = {"kind": "task.fence", "head": head, "data": fence}
            response = self.oracle.apply(single)
            step = f"task.fence {msgspec.json.encode(single).decode()}"
            self._judge(lambda step=step: step, now)
            status = response["head"]["status"]
            self.stats[f"task.fence {status}"] += 1
            if status == 200:
                response["data"]["preload"] = []
            fences.append({**response, "kind": "task.fence"})
        return {"kind": "task.fences", "head": {**head, "status": 200}, "data": {"fences": fences}}

    def tick(self, now: int) -> tuple[list[str], list[OutboxEntry]]:
        """Fire every timeout due now; what fired (for the trace) and the messages sent."""
        state = self.oracle.state
        fired = [f"promise {t.id}" for t in state.promise_timeouts if t.timeout <= now]
        for t in state.task_timeouts:
            if t.timeout <= now:
                fired.append(f"{'lease' if t.kind == LEASE else 'retry'} {t.id}")
        self.stats.update(f"fired {what.split()[0]}" for what in fired)
        outbox = state.outbox
        self.oracle.tick(now)
        self._judge(lambda: f"debug.tick {now}", now)
        return sorted(fired), _new(outbox, self.oracle.state.outbox)

    def restart(self) -> None:
        """Go down; ``back`` brings the server up again with the same state."""
        self.down = True
        self.epoch += 1
        self.stats["server restart"] += 1

    def back(self) -> None:
        self.down = False

    def next_deadline(self) -> int | None:
        state = self.oracle.state
        timeouts = (*state.promise_timeouts, *state.task_timeouts, *state.schedule_timeouts)
        deadlines = [t.timeout for t in timeouts]
        return min(deadlines, default=None)

    def settled_state(self, id: str) -> PromiseState | None:
        """The stored state of a promise if it is settled (None if pending or unknown)."""
        p = self.oracle.state.get_promise(id)
        return p.state if p is not None and p.state != PromiseState.PENDING else None

    def _judge(self, step: Callable[[], str], now: int) -> None:
        snap = self.oracle.snapshot()
        violations = check_state(snap, now) + check_step(
            self._snap, snap, now, retry_timeout=self.retry_timeout
        )
        if violations:
            raise InvariantViolation(step(), violations)
        self._snap = snap
        for p in snap.promises:
            if p.id not in self.created:
                self.created[p.id] = self._order()
            if p.state != PromiseState.PENDING and p.id not in self.settled:
                self.settled[p.id] = self._order()


def _new(before: list[OutboxEntry], after: list[OutboxEntry]) -> list[OutboxEntry]:
    """Entries of ``after`` that ``before`` did not hold, oldest first (an upsert puts the
    newest at the head). ``before`` is alive, so its entries' ids cannot be reused."""
    held = {id(entry) for entry in before}
    return [entry for entry in reversed(after) if id(entry) not in held]
