"""Stopping ends: every wait of a shutdown is bounded, and one that runs out says where.

A process stopping waits for its background tasks (the poll stream, acknowledgements,
runs cancelled at the end of the grace period) and for its connections to close. Any of
those can wait on a peer that never answers (a server killed mid-stream, a half-open
socket): unbounded, ``app.stop()`` would hang silently for ever. Each wait here gives up
after ``CLOSE_TIMEOUT`` and logs a WARNING with the stack of what is stuck, so a hang at
shutdown becomes a line in the log that names its cause, and the process still stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Sequence
from typing import Any

log = logging.getLogger(__name__)

CLOSE_TIMEOUT = 5.0  # seconds a shutdown waits for any one thing


async def finish(tasks: Sequence[asyncio.Future[Any]], what: str) -> None:
    """Wait (at most ``CLOSE_TIMEOUT``) for ``tasks`` to end, typically just cancelled;
    their outcomes are consumed. Those still running after it are left behind, logged."""
    pending = {task for task in tasks if not task.done()}
    if pending:
        _, late = await asyncio.wait(pending, timeout=CLOSE_TIMEOUT)
        for task in late:
            log.warning(
                "%s did not stop within %g s; left behind, stuck at:\n%s",
                what,
                CLOSE_TIMEOUT,
                _where(task),
            )
    for task in tasks:
        if task.done() and not task.cancelled():
            task.exception()  # retrieved: reported by its owner, or not at all


async def close(closing: Awaitable[Any], what: str) -> None:
    """Run ``closing`` (a connection's or a client's close), at most ``CLOSE_TIMEOUT``."""
    await finish([asyncio.ensure_future(closing)], what)


def _where(task: asyncio.Future[Any]) -> str:
    if not isinstance(task, asyncio.Task):
        return "  (not a task)"
    with contextlib.suppress(Exception):
        frames = task.get_stack()
        if frames:
            return "\n".join(
                f"  {frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}"
                for frame in frames
            )
    return "  (no stack)"
