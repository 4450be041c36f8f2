"""A context's frame: where a durable function's calls go, and in what order.

One ``Frame`` per run of a durable function (the root, or a durable step). It owns:

- its place in the promise tree: its id, origin, branch and deadline;
- the numbering of its calls (``next``): each call takes the next position, ``<id>:0``,
  ``<id>:1``, ..., unless it names its promise;
- the replay check at its end (``finish``): a history that goes on past the code's last
  call is refused;
- the lineage tags a child promise carries (``tags``);
- whether its calls are shielded from a cancellation (``shielded``);
- its own promise, when the function runs before it is recorded (``recorded``).

The call surface (``troth.sdk.context``) and the drivers below it (``troth.sdk.steps``,
``troth.sdk.children``) share it, so that the drivers need not know the ``Context``.
"""

from __future__ import annotations

from troth.protocol.conventions import SCOPE, STEP_TAG
from troth.protocol.ids import child_id, descends
from troth.protocol.ids import origin as origin_of
from troth.protocol.records import BRANCH, ORIGIN, PARENT
from troth.sdk.execution import Execution
from troth.sdk.recording import Start
from troth.sdk.replay import Call


class Frame:
    def __init__(
        self,
        execution: Execution,
        id: str,
        origin: str,
        branch: str,
        timeout_at: int,
        shielded: bool = False,
        start: Start | None = None,
    ) -> None:
        self.execution = execution
        self.id = id
        self.origin = origin
        self.branch = branch
        self.timeout_at = timeout_at
        self.seq = 0  # the position the next unnamed call takes
        self.inherited_shield = shielded  # a durable function run from inside a shield
        self.shields = 0  # ``ctx.shield()`` blocks open
        # A durable step that runs before it is recorded: recorded before its first child,
        # so that no record's parent is missing (``troth.sdk.recording``).
        self.unrecorded = start

    @property
    def shielded(self) -> bool:
        return self.inherited_shield or self.shields > 0

    def guard(self) -> None:
        """Raise the signal that stops this run's calls (a lost lease, a suspend), if any."""
        signal = self.execution.refuse()
        if signal is not None:
            raise signal

    def next(self, explicit: str | None) -> str:
        """The id of the next call: its position among this context's calls, unless the
        caller named the promise (then it takes no position, so adding or removing such a
        call shifts no other call's id)."""
        if explicit is not None:
            return explicit
        id = child_id(self.id, str(self.seq))
        self.seq += 1
        return id

    def finish(self) -> None:
        """Refuse a replay that ended before the history did: a call recorded past the
        last one the code made now means a call was removed (or moved later)."""
        execution = self.execution
        next_id = child_id(self.id, str(self.seq))
        record = execution.recorded(next_id)
        if record is not None and STEP_TAG in record.tags:
            execution.refuse_history(
                next_id,
                f"the code now ends after {self.seq} calls but the history records "
                f"{record.tags[STEP_TAG]!r} as call {self.seq}",
            )

    def tags(
        self, id: str, scope: str, call: Call | None = None, own_branch: bool = True
    ) -> dict[str, str]:
        """The tags of a child promise: its scope, its lineage, and the call that made it
        (for the replay check). Only a local step stays on this context's branch; an
        explicit id outside this execution's tree starts a lineage of its own, rooted where
        the id's own origin is (the server requires ids to extend the origin, parent and
        branch tags, and an origin to be a root id: ``x.approval:deadline`` is in
        ``x.approval``'s tree)."""
        return {
            SCOPE: scope,
            ORIGIN: self.origin if descends(id, self.origin) else origin_of(id),
            PARENT: self.id if descends(id, self.id) else id,
            BRANCH: id if own_branch or not descends(id, self.branch) else self.branch,
            **(call.tags() if call is not None else {}),
        }

    async def recorded(self) -> None:
        """This context's own promise exists before any of its children is written."""
        if self.unrecorded is not None:
            await self.unrecorded.send()
