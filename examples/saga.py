"""Saga: book a trip step by step; when a step fails, undo the finished ones in reverse.

    python examples/saga.py [trip-id] [--fail-car]

Each booking registers its compensation once it has finished (``saga.on_failure``). When a
later step fails (or the trip is canceled with ``app.cancel``), the compensations run as
durable steps, last first, and then the error propagates. A crash in the middle of the
undo resumes the undo: nothing is booked twice, nothing is cancelled twice.
"""

from __future__ import annotations

import asyncio
import sys

from troth import Constant, Context, Never, Troth

app = Troth(group="saga")  # embedded in ./troth.db; with TROTH_URL, a worker of that server


class Unavailable(Exception):
    pass


def book(kind: str, trip: str, fail: bool) -> str:
    if fail:
        raise Unavailable(f"no {kind} available for {trip}")
    print(f"  booked {kind}")
    return f"{kind}-{trip}"


def cancel(booking: str) -> None:
    print(f"  cancelled {booking}")


@app.register
async def trip(ctx: Context, trip_id: str, fail_car: bool) -> list[str]:
    booked: list[str] = []
    async with ctx.saga() as saga:
        for kind in ("flight", "hotel", "car"):
            fail = fail_car and kind == "car"
            booking = await ctx.options(retry=Never()).run(book, kind, trip_id, fail)
            booked.append(booking)
            # Registered only now that the booking exists; retried on its own terms.
            saga.options(retry=Constant(1.0, max_attempts=5)).on_failure(cancel, booking)
    return booked


async def main(trip_id: str, fail_car: bool) -> None:
    async with app:
        try:
            print("booked:", await app.run(f"trip-{trip_id}", trip, trip_id, fail_car).result())
        except Unavailable as error:
            print(f"trip {trip_id} rolled back: {error}")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    asyncio.run(main(args[0] if args else "t1", "--fail-car" in sys.argv))
