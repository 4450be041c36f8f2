"""Cancellation: an order canceled while its stock is held on another worker; both clean up.

    python examples/cancellation.py [order-id] [--timeout]

The order charges the card, then asks the warehouse (a worker of another group) to hold
the stock until pickup, three days away. ``app.cancel`` reaches both while they sleep: the
warehouse releases the stock first, then the order refunds the card, each cleanup a
durable step inside ``ctx.shield()``. ``--timeout`` starts the order with a deadline and a
grace period instead: it is canceled with a ``TimedOutError`` reason two seconds in, with
time left for the same cleanup.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from datetime import timedelta

from troth import CanceledError, Context, ExecutionStatus, ServerError, Troth

app = Troth(group="cancellation-orders")  # embedded in ./troth.db; or TROTH_URL's worker
# Against a server the warehouse is a worker of its own group (started in this process too,
# so that the example is one command); embedded, one process serves every group.
WAREHOUSE = "cancellation-warehouse"
warehouse = Troth(group=WAREHOUSE) if os.environ.get("TROTH_URL") else app


def charge(order: str) -> str:
    print(f"  charged order {order}")
    return f"receipt-{order}"


def refund(receipt: str) -> None:
    print(f"  refunded {receipt}")


def reserve(order: str) -> None:
    print(f"  reserved stock for {order} (warehouse)")


def release(order: str) -> None:
    print(f"  released stock for {order} (warehouse)")


@warehouse.register
async def hold_stock(ctx: Context, order: str) -> str:
    await ctx.run(reserve, order)
    try:
        await ctx.sleep(timedelta(days=3))  # until pickup
    except CanceledError:
        async with ctx.shield():
            await ctx.run(release, order)
        raise
    return "picked up"


@app.register
async def place_order(ctx: Context, order: str) -> str:
    receipt = await ctx.run(charge, order)
    try:
        return await ctx.options(target=WAREHOUSE).rpc(hold_stock, order)
    except CanceledError:
        async with ctx.shield():  # a second cancellation cannot stop the refund
            await ctx.run(refund, receipt)
        raise


async def until_held(order_id: str) -> None:
    """Until the warehouse holds the stock (or, on a rerun, the order has already ended)."""
    while True:
        with contextlib.suppress(ServerError):  # not created yet
            if await app.executions.status(order_id) in ENDED:
                return
            if await app.executions.status(f"{order_id}:1") == ExecutionStatus.SUSPENDED:
                return
        await asyncio.sleep(0.05)


ENDED = {
    ExecutionStatus.RESOLVED,
    ExecutionStatus.REJECTED,
    ExecutionStatus.CANCELED,
    ExecutionStatus.TIMEDOUT,
}


async def main(order: str, timeout: bool) -> None:
    async with contextlib.AsyncExitStack() as apps:
        for each in {app, warehouse}:
            await apps.enter_async_context(each)
        id = f"order-{order}"
        if timeout:
            handle = app.options(timeout=timedelta(seconds=4), grace=2).run(id, place_order, order)
        else:
            handle = app.run(id, place_order, order)
            await until_held(id)
            # Run again after a crash, this cancels again, which changes nothing.
            print(f"canceling {id}")
            await app.cancel(id, reason="the customer changed their mind")
        try:
            print(await handle.result())
        except CanceledError as error:
            print(f"order {order} canceled: {error.reason}")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    asyncio.run(main(args[0] if args else "o1", "--timeout" in sys.argv))
