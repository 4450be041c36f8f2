"""Which promises of a task's branch exist, as one hold of the task knows them.

A local step that certainly does not exist yet is run first and recorded after, with its
create and its settle in one request (``Context._local``); one that may exist takes the
slow path (created before it runs), so that a step an earlier run started is found, its
interrupted attempt counted and its recorded retry wait honoured. Never a guess:

- The task's first run knows at once: a task's version rises only when it is acquired (a
  ``task.create`` hands it over at version 1, a never-acquired task's first acquire makes
  it 1), so a hold at version 1 is the only run there ever was, and the branch holds only
  what this hold wrote (``saw``), across the runs it continues (a suspend answered 300,
  a retry of the root, a rerun).
- A later run (resumed after a suspend, re-claimed after a crash, continued after a halt)
  does not know which steps an earlier run left pending (a claim's preload carries settled
  promises only), so before its first fast step it reads the branch's ids once, a paged
  ``promise.search`` by origin and branch (the store walks its origin index). If that read
  fails, every step of the hold takes the slow path.
"""

from __future__ import annotations

import asyncio
import logging

from troth.protocol.kinds import Kind
from troth.protocol.records import BRANCH, ORIGIN
from troth.protocol.requests import PromiseSearchRequest
from troth.protocol.validation import MAX_LIMIT
from troth.sdk.network import Network

log = logging.getLogger(__name__)

_told = False  # whether a failed read of a branch was said at INFO


class Known:
    """The ids of a branch known to exist: complete for a first run, or once learned."""

    def __init__(self, first_run: bool) -> None:
        self.ids: set[str] = set()
        self._complete = first_run
        self._learning: asyncio.Task[bool] | None = None

    def saw(self, id: str) -> None:
        """Promise ``id`` exists (this hold wrote it, or read it)."""
        self.ids.add(id)

    async def absent(self, network: Network, origin: str, branch: str, id: str) -> bool:
        """True only if there is certainly no promise ``id`` in the branch."""
        if not self._complete:
            if self._learning is None:
                self._learning = asyncio.ensure_future(self._learn(network, origin, branch))
            # Shielded: every step of the run waits for the one read, none may cancel it.
            if not await asyncio.shield(self._learning):
                return False
        return id not in self.ids

    async def _learn(self, network: Network, origin: str, branch: str) -> bool:
        cursor: str | None = None
        try:
            while True:
                search = PromiseSearchRequest(
                    tags={ORIGIN: origin, BRANCH: branch}, limit=MAX_LIMIT, cursor=cursor
                )
                _, page = await network.call(Kind.PROMISE_SEARCH, search)
                self.ids.update(record.id for record in page.promises)
                cursor = page.cursor
                if cursor is None:
                    break
        except Exception as error:
            # INFO once per process (a token scoped to a prefix is refused every search, so
            # it would be said on every resume), DEBUG after: only speed is lost.
            global _told
            log.log(
                logging.DEBUG if _told else logging.INFO,
                "could not read branch %s (%r): its steps are created before they run",
                branch,
                error,
            )
            _told = True
            return False
        self._complete = True
        return True
