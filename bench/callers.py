"""Closed-loop callers for the peers' sides of the SDK benchmark (``sdk_dbos.py``,
``sdk_restate.py``): threads that each take the next index, make one call and wait for it
before the next, so ``callers`` is the number of calls in flight. Standard library only:
the peers run it in venvs of their own."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable

Call = Callable[[int], None]
"""One workload call for index ``i``; raises if the answer is wrong."""

Session = Callable[[], contextlib.AbstractContextManager[Call]]
"""What a caller thread makes its calls in (a connection of its own, say)."""


def drive(n: int, callers: int, session: Session) -> dict:
    """Make calls ``0..n-1`` from ``callers`` threads, each in a ``session`` of its own
    (a connection, say); the seconds it took and each call's latency. The first error
    any caller met is raised once all have stopped."""
    latencies: list[float] = []
    indices = iter(range(n))
    lock = threading.Lock()
    errors: list[BaseException] = []

    def caller() -> None:
        try:
            with session() as call:
                while True:
                    with lock:
                        i = next(indices, None)
                    if i is None:
                        return
                    begun = time.perf_counter()
                    call(i)
                    latencies.append(time.perf_counter() - begun)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=caller) for _ in range(callers)]
    begun = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - begun
    if errors:
        raise errors[0]
    return {"seconds": elapsed, "latencies": latencies}


def sessionless(call: Call) -> Session:
    """The session of a call that needs nothing of its own per thread."""
    return lambda: contextlib.nullcontext(call)
