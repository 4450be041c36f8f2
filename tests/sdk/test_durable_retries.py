"""Retry counts are durable: a policy of four attempts makes four, whatever is killed when,
and every failed attempt is recorded where an operator can read it."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from tests.support.processes import ledger, start, wait_for, write_module
from troth.protocol.requests import PromiseCreateRequest
from troth.sdk import Context, ServerError, Troth, TrothError
from troth.testing import VirtualTroth

pytestmark = pytest.mark.anyio

APP = """
def charge() -> None:
    record("start")
    time.sleep(0.4)
    raise RuntimeError("card service down")

@app.register
async def pay(ctx: Context) -> str:
    try:
        await ctx.options(retry=Constant(0.3, max_attempts=4)).run(charge)
    except RuntimeError as e:
        return f"gave up: {e}"
    return "paid"

async def main() -> None:
    async with app:
        print(await app.run(os.environ["ID"], pay).result(), flush=True)

if __name__ == "__main__":
    asyncio.run(main())
"""


@pytest.mark.slow  # worker processes, one killed mid-attempt
async def test_a_kill_during_an_attempt_does_not_add_attempts(mode_env, tmp_path):
    write_module(tmp_path, "payments", APP)
    id = f"pay-{uuid.uuid4().hex[:6]}"
    env = {**mode_env, "LEDGER": str(tmp_path / "ledger"), "ID": id, "TTL": "2"}
    first = start(tmp_path, env, "payments.py")
    try:
        wait_for(tmp_path / "ledger", "start", count=3)  # the third attempt is running
    finally:
        first.kill()  # SIGKILL: the attempt is cut off, nothing is released
        first.wait()
    second = start(tmp_path, env, "payments.py")
    output = second.communicate(timeout=60)[0].decode()
    assert second.returncode == 0, output
    assert "gave up: card service down" in output
    # Before the count was durable, the new process started again at attempt 1: 3 + 4 = 7
    # (or 6, when the kill fell between attempts).
    assert ledger(tmp_path / "ledger")["start"] == 4

    # Every failed attempt but the last is on record, with its error and the next start.
    reader = Troth(url=mode_env.get("TROTH_URL"), db=mode_env.get("TROTH_DB"))
    try:
        step = f"{id}:0"
        for attempt in (1, 2, 3):
            record = await reader.promises.get(f"{step}.attempt{attempt}")
            assert record.state == "rejected"
            assert record.tags["troth:attempt"] == str(attempt)
            assert int(record.tags["troth:retry_at"]) > 0
            if attempt < 3:
                with pytest.raises(RuntimeError, match="card service down"):
                    record.value()
            else:  # the attempt the kill cut off
                with pytest.raises(TrothError, match=r"attempt 3 of step .* was interrupted"):
                    record.value()
        with pytest.raises(ServerError, match="404"):
            await reader.promises.get(f"{step}.attempt4")  # the last attempt is the step's
        with pytest.raises(RuntimeError, match="card service down"):
            (await reader.promises.get(step)).value()
    finally:
        await reader.stop()


@pytest.mark.parametrize("kind", ["random", "uuid", "now"])
async def test_a_value_cut_off_by_a_crash_is_made_again_not_failed(tmp_path, kind):
    """A recorded value whose run died between creating and settling its promise is not an
    interrupted attempt (that would fail ``await ctx.random()`` under its one-attempt policy):
    the next run makes it."""
    app = VirtualTroth(db=str(tmp_path / "t.db"), autojump=False)

    @app.register
    async def flow(ctx: Context) -> str:
        return str(await getattr(ctx, kind)())

    async with app:
        tags = {"resonate:scope": "local", "resonate:origin": "v", "resonate:parent": "v",
                "resonate:branch": "v", "troth:step": kind, "troth:run": "dead-1/1"}  # fmt: skip
        at = app.now() + 60_000
        request = PromiseCreateRequest("v:0", at, app.codec.encode({"func": kind}), tags)
        status, _ = await app.runtime.network.send("promise.create", request)
        assert status == 200
        assert await asyncio.wait_for(app.run("v", flow).result(), 10)
