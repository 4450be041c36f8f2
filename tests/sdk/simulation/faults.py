"""How hostile one seed's world is: loss, duplication and delay on every hop, crashes,
graceful stops and server restarts.

``Faults.draw`` picks the intensities from the seed, so across seeds the simulation ranges
from a calm network to a lossy, slow one with several crashes; ``Faults.none`` is the
uninterrupted run every seed's outcome is compared with.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

RESTART_CHANCES = 3


@dataclass(frozen=True)
class Faults:
    drop_request: float = 0.0  # a request never reaches the server
    drop_reply: float = 0.0  # the server applied it, but the answer never comes back
    drop_message: float = 0.0  # an execute or unblock is never delivered
    duplicate_message: float = 0.0  # ... or delivered twice
    latency_ms: int = 1  # the longest ordinary hop (uniform from 1 ms)
    slow: float = 0.0  # chance that a hop is slow instead: up to ``slow_ms``
    slow_ms: int = 0
    crashes: int = 0  # worker crashes, at random times in the first ``crash_window_ms``
    crash_window_ms: int = 20_000
    timeout_ms: int = 1000  # how long a sender waits for a lost request or reply
    # Graceful stops (``app.stop()``, as on SIGTERM) in the same window, each letting the
    # running steps finish for ``grace_ms`` of virtual time; a new incarnation boots later.
    stops: int = 0
    grace_ms: int = 1000
    # The server restarts: it is unreachable (every request refused, the message streams
    # cut, replies still on the way lost) and comes back ``restart_ms`` later, its state
    # intact. Each of ``RESTART_CHANCES`` instants in the window is a restart with this
    # seed's probability ``restart``.
    restart: float = 0.0
    restart_ms: int = 3000

    @classmethod
    def none(cls) -> Faults:
        return cls()

    @classmethod
    def draw(cls, rng: random.Random) -> Faults:
        return cls(
            drop_request=rng.choice([0.0, 0.02, 0.08]),
            drop_reply=rng.choice([0.0, 0.02, 0.08]),
            drop_message=rng.choice([0.0, 0.05, 0.2]),
            duplicate_message=rng.choice([0.0, 0.05, 0.2]),
            latency_ms=rng.choice([5, 50, 200]),
            slow=rng.choice([0.0, 0.02, 0.1]),
            slow_ms=rng.choice([1000, 3000, 6000]),
            crashes=rng.choice([0, 1, 2, 4]),
            stops=rng.choice([0, 1, 2]),
            grace_ms=rng.choice([100, 1000, 3000]),
            restart=rng.choice([0.0, 0.2, 0.5]),
            restart_ms=rng.choice([500, 3000, 10_000]),
        )

    def hop(self, rng: random.Random) -> int:
        """How long one request, reply or message takes to arrive."""
        if self.slow and rng.random() < self.slow:
            return rng.randint(self.latency_ms, max(self.latency_ms, self.slow_ms))
        return rng.randint(1, self.latency_ms)

    def happens(self, rng: random.Random, chance: float) -> bool:
        # No draw for a fault that cannot happen: the uninterrupted run stays lean.
        return chance > 0 and rng.random() < chance
