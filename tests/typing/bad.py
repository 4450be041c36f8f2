"""Misuses of the SDK that strict mypy must reject, each on a line of its own.

A line that must fail ends with ``# E: [code]`` (several codes when mypy reports several
errors there); ``tests/typing/test_typing.py`` asserts that mypy reports exactly the marked
lines with exactly those codes. Never run, and not a pytest module.
"""

from __future__ import annotations

from troth import Context, Troth

app = Troth()


def debit(account: str, amount: int) -> str:
    return account * amount


def count() -> int:
    return 1


@app.register
async def credit(ctx: Context, account: str, amount: int) -> str:
    return f"{account}:{amount}"


async def workflow(ctx: Context) -> None:
    # The function's arguments are checked against its signature.
    await ctx.run(debit, "acct", "ten")  # E: [call-overload]
    await ctx.run(debit, "acct")  # E: [call-overload]
    await ctx.rpc(credit, "acct")  # E: [call-overload]
    await ctx.run(credit, "acct", 1, currency="EUR")  # E: [call-arg]
    await ctx.options(timeout=5).run(debit, 1, 1)  # E: [call-overload]

    # An option passed as a bare keyword is an argument the function does not take. (On a
    # plain function mypy also reports it against the durable overload, hence two codes.)
    await ctx.run(debit, "acct", 1, timeout=5)  # E: [call-arg] [arg-type]
    await ctx.rpc(credit, "acct", 1, target="ledger")  # E: [call-arg]
    await ctx.detached(credit, "acct", 1, retry=None)  # E: [call-arg]
    ctx.options(timeot=5)  # E: [call-arg]

    # The result has the function's return type. Assigned straight to a variable of another
    # type, mypy infers the call from the variable and finds no overload that fits.
    wrong: str = await ctx.run(count)  # E: [call-overload]
    n = await ctx.run(count)
    text: str = n  # E: [assignment]
    (await ctx.run(count)).upper()  # E: [attr-defined]
    ctx.run(count) + 1  # E: [operator]
    when: int = await ctx.now()  # E: [assignment]
    order: str = await ctx.uuid()  # E: [assignment]
    print(wrong, text, when, order)


async def main() -> None:
    handle = app.run("credit-1", credit, "acct", 1)
    cents: int = await handle.result()  # E: [assignment]
    handle.result().upper()  # E: [attr-defined]
    (await handle.result()).hex()  # E: [attr-defined]
    app.run("credit-2", credit, "acct", amount="1")  # E: [arg-type]
    app.rpc("credit-3", credit, "acct", 1, target="payments")  # E: [call-arg]
    app.options(retry=None).run("credit-4", credit, "acct", 1)  # E: [call-arg]
    # app.register kept credit's own signature.
    await credit("not a context", "acct", 1)  # E: [arg-type]
    print(cents)
