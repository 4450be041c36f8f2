"""A stop always ends: a background task that will not stop, or a connection that will not
close, is left behind after ``CLOSE_TIMEOUT`` with a WARNING naming where it is stuck
(``troth.sdk.closing``), instead of hanging ``app.stop()`` for ever."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from troth.sdk import closing


async def stubborn(release: asyncio.Event) -> None:
    """Ignores cancellation until ``release`` is set, as a task stuck in a shielded close."""
    while not release.is_set():
        try:
            await release.wait()
        except asyncio.CancelledError:
            continue


def test_a_task_that_ignores_cancellation_is_left_behind_with_its_stack(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(closing, "CLOSE_TIMEOUT", 0.2)

    async def main() -> float:
        release = asyncio.Event()
        task = asyncio.create_task(stubborn(release))
        await asyncio.sleep(0)
        task.cancel()
        started = time.monotonic()
        await closing.finish([task], "the stubborn task")
        took = time.monotonic() - started
        release.set()
        await task
        return took

    with caplog.at_level(logging.WARNING, logger="troth.sdk.closing"):
        took = asyncio.run(main())
    assert 0.2 <= took < 2
    [record] = [r for r in caplog.records if "did not stop" in r.getMessage()]
    assert "the stubborn task did not stop within 0.2 s" in record.getMessage()
    assert "in stubborn" in record.getMessage()  # where it is stuck


def test_tasks_that_stop_are_awaited_and_their_errors_retrieved(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def fails() -> None:
        raise RuntimeError("boom")

    async def main() -> None:
        failing = asyncio.create_task(fails())
        sleeping = asyncio.create_task(asyncio.sleep(60))
        sleeping.cancel()
        await closing.finish([failing, sleeping], "two tasks")
        assert failing.done() and sleeping.cancelled()

    with caplog.at_level(logging.WARNING):
        asyncio.run(main())
    assert not [r for r in caplog.records if "did not stop" in r.getMessage()]
    # A retrieved exception is not reported again as "never retrieved".
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]


def test_a_close_that_never_returns_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(closing, "CLOSE_TIMEOUT", 0.1)

    async def main() -> None:
        never = asyncio.get_running_loop().create_future()
        await asyncio.wait_for(closing.close(never, "a close"), 2)

    asyncio.run(main())
