"""``ctx.saga()``: compensations registered as steps finish run as durable steps, last
first (or all at once), on an error or a cancellation, each by its own retry policy and
exactly once across a ``kill -9``; then the block's error propagates, with the
compensations' failures in an ``ExceptionGroup``.

Before, a saga was hand-written ``try``/``except`` (``examples/saga.py``): a cancellation
skipped it, and every workflow repeated the bookkeeping.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import AsyncIterator

import pytest

from tests.support.processes import ledger, wait_for, worker, write_module
from troth.sdk import CanceledError, Constant, Context, ExecutionStatus, Troth

pytestmark = pytest.mark.anyio

LOG: list[str] = []
FLAKY: Counter[str] = Counter()


class Unavailable(Exception):
    pass


def book(what: str) -> str:
    LOG.append(f"book {what}")
    if what == "car":
        raise Unavailable("no car")
    return what


def release(what: str) -> None:
    LOG.append(f"release {what}")


def stubborn(what: str) -> None:
    """Fails its first call for each booking, then releases it."""
    FLAKY[what] += 1
    if FLAKY[what] == 1:
        raise ConnectionError(f"cannot reach the {what} service")
    LOG.append(f"release {what}")


def broken(what: str) -> None:
    raise RuntimeError(f"cannot release {what}")


async def trip(ctx: Context, kinds: list[str], parallel: bool) -> list[str]:
    booked = []
    async with ctx.saga(parallel=parallel) as saga:
        for kind in kinds:
            booked.append(await ctx.options(retry=Constant(0.01, max_attempts=1)).run(book, kind))
            if kind == "hotel":
                saga.options(retry=Constant(0.05, max_attempts=3)).on_failure(stubborn, kind)
            elif kind == "train":
                saga.options(retry=Constant(0.01, max_attempts=2)).on_failure(broken, kind)
            else:
                saga.on_failure(release, kind)
    return booked


async def waiting_trip(ctx: Context) -> None:
    async with ctx.saga() as saga:
        await ctx.run(book, "flight")
        saga.on_failure(release, "flight")
        await ctx.promise()  # canceled while waiting here


@pytest.fixture
async def app(mode_env: dict[str, str]) -> AsyncIterator[Troth]:
    LOG.clear()
    FLAKY.clear()
    app = Troth(
        url=mode_env.get("TROTH_URL"),
        group=mode_env.get("TROTH_GROUP", "default"),
        db=mode_env.get("TROTH_DB"),
    )
    app.register(trip)
    app.register(waiting_trip)
    async with app:
        yield app


async def test_a_failure_compensates_the_finished_steps_last_first(app: Troth, uid: str):
    with pytest.raises(Unavailable, match="no car"):
        await app.run(uid, trip, ["flight", "hotel", "car"], False).result()
    assert LOG == ["book flight", "book hotel", "book car", "release hotel", "release flight"]
    assert FLAKY["hotel"] == 2  # retried by its own policy


async def test_success_compensates_nothing(app: Troth, uid: str):
    assert await app.run(uid, trip, ["flight", "hotel"], False).result() == ["flight", "hotel"]
    assert LOG == ["book flight", "book hotel"]


async def test_failed_compensations_are_attached_to_the_error(app: Troth, uid: str):
    with pytest.raises(ExceptionGroup) as e:
        await app.run(uid, trip, ["flight", "train", "car"], False).result()
    original, failure = e.value.exceptions
    assert isinstance(original, Unavailable)
    assert isinstance(failure, RuntimeError) and "cannot release train" in str(failure)
    assert LOG[-1] == "release flight"  # the others still ran


async def test_parallel_compensation_runs_every_one(app: Troth, uid: str):
    with pytest.raises(Unavailable):
        await app.run(uid, trip, ["flight", "hotel", "bus", "car"], True).result()
    assert sorted(LOG[4:]) == ["release bus", "release flight", "release hotel"]


async def test_a_cancellation_compensates_and_propagates(app: Troth, uid: str):
    handle = app.run(uid, waiting_trip)
    for _ in range(200):
        if await handle.status() == ExecutionStatus.SUSPENDED:
            break
        await asyncio.sleep(0.05)
    await app.cancel(uid, reason="plans changed")
    with pytest.raises(CanceledError) as e:
        await asyncio.wait_for(handle.result(), 20)
    assert e.value.reason == "plans changed"
    assert LOG == ["book flight", "release flight"]


APP = """
GATE = Path(os.environ["LEDGER"]).parent / "gate"

def book(what: str) -> str:
    record(f"book {what}")
    if what == "car":
        raise ValueError("no car")
    return what

def release(what: str) -> None:
    record(f"start release {what}")
    if what == "flight":  # the test kills the worker here, before the effect
        while not GATE.exists():
            time.sleep(0.02)
    record(f"release {what}")

@app.register
async def trip(ctx: Context) -> None:
    async with ctx.saga() as saga:
        for kind in ("flight", "hotel", "car"):
            await ctx.options(retry=Constant(0.01, max_attempts=1)).run(book, kind)
            saga.on_failure(release, kind)
"""


@pytest.mark.slow
async def test_kill_9_during_compensation_runs_each_compensation_once(mode_env, tmp_path):
    write_module(tmp_path, "trips", APP)
    env = {**mode_env, "LEDGER": str(tmp_path / "ledger"), "TTL": "2"}
    client = Troth(url=mode_env.get("TROTH_URL"), group="clients", db=mode_env.get("TROTH_DB"))
    first = worker(tmp_path, env, "trips:app")
    try:
        id = f"trip-{uuid.uuid4().hex[:6]}"
        handle = client.options(target=mode_env.get("TROTH_GROUP", "default")).rpc(id, "trip")
        await handle.started()
        wait_for(tmp_path / "ledger", "start release flight")
    finally:
        first.kill()
        first.wait()
    (tmp_path / "gate").touch()
    second = worker(tmp_path, env, "trips:app")
    try:
        with pytest.raises(ValueError, match="no car"):
            await asyncio.wait_for(handle.result(), 60)
    finally:
        second.kill()
        second.wait()
        await client.stop()
    assert ledger(tmp_path / "ledger") == {
        "book flight": 1,
        "book hotel": 1,
        "book car": 1,
        "start release hotel": 1,
        "release hotel": 1,
        "start release flight": 2,  # cut off before its effect, run again
        "release flight": 1,
    }
