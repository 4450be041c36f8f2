"""Wall-clock milliseconds that never go backwards.

Handlers compare ``now`` with stored deadlines; if the system clock steps back (NTP), a
naive reading could un-expire a promise that a previous request already saw expired.
"""

from __future__ import annotations

import time


class MonotonicWallClock:
    def __init__(self) -> None:
        self._last = 0

    def now(self) -> int:
        now = time.time_ns() // 1_000_000
        if now < self._last:
            return self._last
        self._last = now
        return now
