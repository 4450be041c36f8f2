"""Saga: book a trip step by step; when a step fails, undo the finished ones in reverse.

    python examples/saga.py [trip-id] [--fail-car]

Every booking and every compensation is a durable step, so a crash in the middle of the
undo resumes the undo: nothing is booked twice, nothing is cancelled twice.
"""

from __future__ import annotations

import asyncio
import sys

from _app import make_app

from troth import Context, Never

app = make_app()


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
    try:
        for kind in ("flight", "hotel", "car"):
            fail = fail_car and kind == "car"
            booked.append(await ctx.options(retry=Never()).run(book, kind, trip_id, fail))
    except Unavailable as error:
        for booking in reversed(booked):
            await ctx.run(cancel, booking)
        raise error
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
