"""Human approval: a workflow waits (durably, for up to a day) on a promise settled outside.

    python examples/approval.py [request-id] [--reject]

The workflow creates an external promise and sends its id to an approver (here a
simulated one that answers after a second, through ``app.promises``). While it waits the
execution is suspended on the server: no process holds it, and it survives restarts.
"""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta

from _app import make_app

from troth import Context

app = make_app()
inbox: asyncio.Queue[str] = asyncio.Queue()


def ask_approver(promise_id: str, amount: int) -> None:
    print(f"  approval requested for {amount} (promise {promise_id})")
    inbox.put_nowait(promise_id)


@app.register
async def expense(ctx: Context, amount: int) -> str:
    approval = ctx.promise(timeout=timedelta(days=1))
    await ctx.run(ask_approver, approval.id, amount)
    decision = await approval
    return "paid" if decision["approved"] else f"refused: {decision['reason']}"


async def approver(approve: bool) -> None:
    promise_id = await inbox.get()
    await asyncio.sleep(1)
    reason = "" if approve else "over budget"
    await app.promises.resolve(promise_id, {"approved": approve, "reason": reason})
    print(f"  approver answered {'yes' if approve else 'no'}")


async def main(request_id: str, approve: bool) -> None:
    async with app:
        answer = asyncio.create_task(approver(approve))
        result = await app.run(f"expense-{request_id}", expense, 120).result()
        answer.cancel()
        print(f"expense {request_id}: {result}")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    asyncio.run(main(args[0] if args else "e1", "--reject" not in sys.argv))
