"""Human approval: a workflow waits (durably, for up to a day) on a promise settled outside.

    python examples/approval.py [request-id] [--reject] [--by-hand]

The workflow creates an external promise, named after the request, and asks an approver
to settle it. Here a simulated approver answers after a second, through ``app.promises``;
with ``--by-hand`` nobody does, and the example prints the command that approves from
another shell. While it waits the execution is suspended: no process holds it, and a
``kill -9`` loses nothing — run the same command again and it goes on waiting (or
finishes, if the approval came in meanwhile).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import sys
from datetime import timedelta

from troth import Context, Troth

app = Troth(group="approval")  # embedded in ./troth.db; with TROTH_URL, a worker of that server


def ask_approver(promise_id: str, amount: int) -> None:
    print(f"  approval requested for {amount} (promise {promise_id})", flush=True)


@app.register
async def expense(ctx: Context, amount: int) -> str:
    # Named, so that anyone who knows the request can settle it (and find it after a crash).
    approval = ctx.promise(id=f"{ctx.id}:approval", timeout=timedelta(days=1))
    await ctx.run(ask_approver, approval.id, amount)
    decision = await approval
    return "paid" if decision["approved"] else f"refused: {decision['reason']}"


def approve_command(promise_id: str) -> str:
    """The shell command that approves ``promise_id``, for this app's server or file."""
    if app.url is not None:
        where = "TROTH_URL=" + shlex.quote(
            app.url if isinstance(app.url, str) else ",".join(app.url)
        )
    else:
        where = "TROTH_DB=" + shlex.quote(os.path.abspath(app.db or "troth.db"))
    value = shlex.quote('{"approved": true, "reason": ""}')
    return f"{where} troth promises resolve {shlex.quote(promise_id)} --value {value}"


async def approver(promise_id: str, approve: bool) -> None:
    await asyncio.sleep(1)
    reason = "" if approve else "over budget"
    await app.promises.resolve(promise_id, {"approved": approve, "reason": reason})
    print(f"  approver answered {'yes' if approve else 'no'}", flush=True)


async def main(request_id: str, approve: bool, by_hand: bool) -> None:
    id = f"expense-{request_id}"
    async with app:
        handle = app.run(id, expense, 120)
        promise_id = f"{id}:approval"  # the name the workflow gives its promise
        print(f"to approve from another shell:\n  {approve_command(promise_id)}", flush=True)
        answer = None if by_hand else asyncio.create_task(approver(promise_id, approve))
        result = await handle.result()
        if answer is not None:
            answer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await answer
        print(f"expense {request_id}: {result}")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    flags = set(sys.argv[1:]) - set(args)
    asyncio.run(main(args[0] if args else "e1", "--reject" not in flags, "--by-hand" in flags))
