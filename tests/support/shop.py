"""A small app whose executions show every kind of node an operator looks at: an rpc
child, a step that keeps failing and is retried, a sleep, a plain result. The views'
tests (the JSON API, ``troth tree``, ``troth executions``) run it in real ``troth worker``
processes, in group ``shop``."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

from tests.support.processes import worker

GROUP = "shop"

APP = """
from datetime import timedelta

from troth import Constant, Context, Troth

app = Troth()


@app.register
async def reserve(ctx: Context, sku: str) -> str:
    return await ctx.run(lambda: f"reserved {sku}")


def charge_card(order: int) -> str:
    raise ConnectionError(f"card service down for order {order}")


@app.register
async def checkout(ctx: Context, order: int) -> str:
    reserved = await ctx.rpc(reserve, "sku-1")
    # Fails every time and is retried every half second: pending, its attempts recorded.
    await ctx.options(retry=Constant(interval=0.5)).run(charge_card, order)
    return reserved


@app.register
async def nap(ctx: Context, seconds: float) -> str:
    await ctx.sleep(timedelta(seconds=seconds))
    return "rested"


@app.register
async def add(ctx: Context, a: int, b: int) -> int:
    return await ctx.run(lambda: a + b)
"""


def shop_worker(
    folder: Path, *, url: str | None = None, db: str | None = None
) -> subprocess.Popen[bytes]:
    """A ``troth worker`` of the shop app on a server ``url`` or a database file ``db``."""
    (folder / "shop.py").write_text(textwrap.dedent(APP))
    env = {"TROTH_URL": url or "", "TROTH_DB": db or "", "TROTH_GROUP": GROUP}
    return worker(folder, env, "shop:app", log=folder / "worker.log")
