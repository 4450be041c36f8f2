"""User code written the way the README and docs/sdk.md write it; it must pass strict mypy.

Not a pytest module (its name does not start with ``test_``) and never run: mypy reads it
(``tests/typing/test_typing.py``, and the gate in ``.ci/run``). Every value it reads from
the SDK is annotated with the type a user would expect, so a call whose type degrades to a
wrong one (or to ``Any`` used where a type is required) fails the check.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime, timedelta

from troth import CanceledError, Context, DurableFuture, Exponential, Handle, Never, Troth

app = Troth()


def debit(account: str, amount: int) -> str:
    return f"debited {amount} from {account}"


async def fetch(url: str, *, timeout: float = 10.0) -> bytes:
    return url.encode()


def total(*amounts: int, fee: int = 0) -> int:
    return sum(amounts) + fee


@app.register
async def credit(ctx: Context, account: str, amount: int) -> str:
    return f"credited {amount} to {account}"


@app.register(name="audit", version=2, retry=Never(), timeout=timedelta(hours=1))
async def audit(ctx: Context, entry: str, *, level: int = 0) -> None:
    await ctx.sleep(1)


@app.register
async def transfer(ctx: Context, src: str, dst: str, amount: int) -> dict[str, str]:
    # Steps: a plain function, an async function (its own keyword `timeout` reaches it),
    # variadic and keyword arguments, and a durable function run in-process.
    debited: str = await ctx.run(debit, src, amount)
    body: bytes = await ctx.run(fetch, "https://example.com", timeout=5.0)
    summed: int = await ctx.run(total, 1, 2, 3, fee=1)
    credited: str = await ctx.run(credit, dst, amount=amount)

    # Options go through their own channel.
    retried: str = await ctx.options(retry=Exponential(), timeout=30).run(debit, src, 1)
    receipt: str = await ctx.options(timeout=timedelta(minutes=5)).rpc(credit, dst, amount)
    by_name = await ctx.options(target="ledger", version=2).rpc("audit", "moved", level=1)
    await ctx.rpc(audit, "moved", level=1)
    detached: DurableFuture[None] = ctx.detached(audit, "later")

    # Futures started first, awaited later (fan out).
    futures: list[DurableFuture[str]] = [ctx.run(debit, a, amount) for a in (src, dst)]
    debits: list[str] = [await f for f in futures]
    both: list[str] = list(await asyncio.gather(ctx.run(debit, src, 1), ctx.run(debit, dst, 2)))

    # Timers, external promises, recorded values.
    await ctx.sleep(timedelta(seconds=1))
    await ctx.sleep(until=datetime(2030, 1, 1))
    approval = ctx.promise(timeout=timedelta(days=1), data={"amount": amount})
    approval_id: str = approval.id
    decision = await approval
    now: datetime = await ctx.now()
    draw: float = await ctx.random()
    order: uuid.UUID = await ctx.uuid()

    await detached
    return {
        "debited": debited,
        "body": body.decode(),
        "sum": str(summed),
        "credited": credited,
        "retried": retried,
        "receipt": receipt,
        "by_name": str(by_name),
        "debits": ",".join(debits + both),
        "approval": f"{approval_id}={decision}",
        "when": f"{now.isoformat()} {draw} {order}",
    }


def refund(receipt: str, *, note: str = "") -> None:
    pass


@app.register
async def cancellable(ctx: Context, account: str) -> str:
    # A saga's compensations are typed by their functions, like any call.
    async with ctx.saga(parallel=False) as saga:
        receipt: str = await ctx.run(debit, account, 5)
        saga.on_failure(refund, receipt, note="undo")
        saga.options(retry=Never()).on_failure(credit, account, 5)
    try:
        await ctx.sleep(60)
    except CanceledError as e:
        reason: str | BaseException | None = e.reason
        async with ctx.shield():
            await ctx.run(refund, receipt)
        raise CanceledError(ctx.id, reason) from e
    late: bool = ctx.cancel_requested
    child: str = await ctx.options(timeout=60, grace=10).rpc(credit, account, 1)
    return f"{child} {late}"


async def main() -> None:
    async with app:
        graced = app.options(timeout=timedelta(hours=1), grace=timedelta(minutes=5))
        stoppable: Handle[str] = graced.run("cancel-1", cancellable, "a")
        await app.cancel("cancel-1", reason="no longer needed")
        await app.cancel("cancel-1", TimeoutError("late"), detached=True)
        await stoppable.cancel("changed plans")
        await stoppable.started()
        handle: Handle[dict[str, str]] = app.run("transfer-42", transfer, "a", "b", 10)
        result: dict[str, str] = await handle.result()
        receipt: str = await app.rpc("credit-7", credit, "b", 10).result()
        step: str = await app.run("debit-1", debit, "a", 1).result()
        fetched: bytes = await app.run("fetch-1", fetch, "https://example.com").result()
        payments = app.options(target="payments", timeout=3600)
        optioned: str = await payments.rpc("credit-8", credit, "c", 5).result()
        two_days = app.options(timeout=timedelta(days=2))
        later: Handle[dict[str, str]] = two_days.run("transfer-43", transfer, "a", "b", amount=1)
        deadline: dict[str, str] = await later.result()
        by_name = await app.rpc("audit-1", "audit", "entry").result()
        print(result["debited"], receipt, step, fetched, optioned, deadline, by_name)


if __name__ == "__main__":
    asyncio.run(main())
