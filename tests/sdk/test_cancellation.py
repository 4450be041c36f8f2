"""Cooperative cancellation with real worker processes, embedded and against ``troth serve``:
``app.cancel`` reaches an execution wherever it is (running a step, sleeping, suspended
with no worker at all, awaiting an rpc on another group, three levels deep), its cleanup
runs inside ``ctx.shield()`` exactly once even when its worker is killed mid-cleanup, and
the handle reports ``CanceledError`` with the reason.

Before, ``app.promises.cancel`` only terminated the root: no cleanup ran and every child
went on.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.support.processes import ledger, wait_for, worker, write_module
from troth.sdk import (
    CanceledError,
    Constant,
    Context,
    ExecutionStatus,
    ServerError,
    TimedOutError,
    Troth,
)

pytestmark = pytest.mark.anyio

APP = """
from troth import CanceledError

CHILD_GROUP = os.environ.get("CHILD_GROUP", "default")
GATE = Path(os.environ["LEDGER"]).parent / "gate"

def effect(line: str) -> str:
    record(line)
    return line

def blocking(line: str) -> str:
    # Waits for the test to open the gate: the test acts while this step runs.
    record(f"start {line}")
    while not GATE.exists():
        time.sleep(0.02)
    record(line)
    return line

async def cleanup(ctx: Context, who: str) -> None:
    async with ctx.shield():
        await ctx.run(effect, f"cleanup {who}")

@app.register
async def stepper(ctx: Context) -> str:
    try:
        await ctx.run(blocking, "step 1")
        await ctx.run(effect, "step 2")
    except CanceledError:
        await cleanup(ctx, "stepper")
        raise
    return "finished"

@app.register
async def sleeper(ctx: Context) -> str:
    await ctx.run(effect, "before sleep")
    try:
        await ctx.sleep(3600)
    except CanceledError:
        await cleanup(ctx, "sleeper")
        raise
    return "woke"

@app.register
async def two_cleanups(ctx: Context) -> str:
    try:
        await ctx.sleep(3600)
    except CanceledError:
        async with ctx.shield():
            await ctx.run(effect, "cleanup 1")
            await ctx.run(blocking, "cleanup 2")
            await ctx.run(effect, "cleanup 3")
        raise
    return "woke"

@app.register
async def level(ctx: Context, depth: int) -> str:
    try:
        if depth > 1:
            await ctx.options(target=CHILD_GROUP).rpc(level, depth - 1)
        else:
            await ctx.sleep(3600)
    except CanceledError:
        await cleanup(ctx, f"level {depth}")
        raise
    return f"level {depth} done"
"""


@pytest.fixture
async def client(mode_env: dict[str, str]) -> AsyncIterator[Troth]:
    app = Troth(url=mode_env.get("TROTH_URL"), group="clients", db=mode_env.get("TROTH_DB"))
    yield app  # only calls: never started
    await app.stop()


def start(tmp_path: Path, mode_env: dict[str, str], group: str | None = None, **env: str):
    write_module(tmp_path, "flows", APP)
    full = {**mode_env, "LEDGER": str(tmp_path / "ledger"), **env}
    if group is not None:
        full["TROTH_GROUP"] = group
    return worker(tmp_path, full, "flows:app")


def stop(*workers: subprocess.Popen[bytes]) -> None:
    for w in workers:
        if w.poll() is None:
            w.kill()
        w.wait()


def group_of(mode_env: dict[str, str]) -> str:
    return mode_env.get("TROTH_GROUP", "default")


async def canceled(handle, reason: str) -> CanceledError:
    with pytest.raises(CanceledError) as e:
        await asyncio.wait_for(handle.result(), 30)
    assert e.value.reason == reason, e.value
    return e.value


async def until(status: ExecutionStatus, client: Troth, id: str) -> None:
    deadline = time.monotonic() + 20
    now = None
    while now != status:
        assert time.monotonic() < deadline, f"{id} is {now}, never {status}"
        await asyncio.sleep(0.05)
        with contextlib.suppress(ServerError):  # not created yet
            now = await client.executions.status(id)


@pytest.mark.slow  # a worker process
async def test_cancel_during_a_step_lets_it_finish_and_stops_at_the_next_call(
    mode_env, tmp_path, client
):
    w = start(tmp_path, mode_env)
    try:
        id = f"step-{uuid.uuid4().hex[:6]}"
        handle = client.options(target=group_of(mode_env)).rpc(id, "stepper")
        await handle.started()
        wait_for(tmp_path / "ledger", "start step 1")
        await asyncio.sleep(1.0)  # past the run's delay before it listens
        await client.cancel(id, reason="customer left")
        await asyncio.sleep(2.0)  # the worker hears of it (embedded: within a second)
        (tmp_path / "gate").touch()
        await canceled(handle, "customer left")
        assert await client.executions.status(id) == ExecutionStatus.CANCELED
    finally:
        stop(w)
    # The running step finished and was recorded; the next one never ran.
    assert ledger(tmp_path / "ledger") == {
        "start step 1": 1,
        "step 1": 1,
        "cleanup stepper": 1,
    }


@pytest.mark.slow  # a worker process
async def test_cancel_during_a_sleep_wakes_it_and_runs_its_cleanup(mode_env, tmp_path, client):
    w = start(tmp_path, mode_env)
    try:
        id = f"sleep-{uuid.uuid4().hex[:6]}"
        handle = client.options(target=group_of(mode_env)).rpc(id, "sleeper")
        await handle.started()
        await until(ExecutionStatus.SUSPENDED, client, id)
        await client.cancel(id, reason="no longer needed")
        await canceled(handle, "no longer needed")
    finally:
        stop(w)
    assert ledger(tmp_path / "ledger") == {"before sleep": 1, "cleanup sleeper": 1}


@pytest.mark.slow  # worker processes
async def test_cancel_while_suspended_with_no_worker_runs_when_one_starts(
    mode_env, tmp_path, client
):
    first = start(tmp_path, mode_env)
    id = f"idle-{uuid.uuid4().hex[:6]}"
    try:
        handle = client.options(target=group_of(mode_env)).rpc(id, "sleeper")
        await handle.started()
        await until(ExecutionStatus.SUSPENDED, client, id)
    finally:
        stop(first)
    await client.cancel(id, reason="while nobody ran it")
    assert ledger(tmp_path / "ledger") == {"before sleep": 1}
    second = start(tmp_path, mode_env)
    try:
        await canceled(handle, "while nobody ran it")
    finally:
        stop(second)
    assert ledger(tmp_path / "ledger") == {"before sleep": 1, "cleanup sleeper": 1}


@pytest.mark.slow  # worker processes
async def test_cancel_reaches_an_rpc_child_on_another_group_three_levels_deep(
    mode_env, tmp_path, client
):
    """level 3 (group A) -> rpc level 2 (group B) -> rpc level 1 (group B), which sleeps.
    Each level cleans up, the deepest first: a parent awaiting a child waits for the
    child's own cleanup and then observes the child's cancellation."""
    a, b = f"a{uuid.uuid4().hex[:6]}", f"b{uuid.uuid4().hex[:6]}"
    if "TROTH_URL" not in mode_env:
        a = b = "default"  # embedded: one file, one group; still two processes
    workers = [
        start(tmp_path, mode_env, a, CHILD_GROUP=b),
        start(tmp_path, mode_env, b, CHILD_GROUP=b),
    ]
    try:
        id = f"deep-{uuid.uuid4().hex[:6]}"
        handle = client.options(target=a).rpc(id, "level", 3)
        await handle.started()
        await until(ExecutionStatus.SUSPENDED, client, f"{id}:0.0")
        await client.cancel(id, reason="stop all")
        await canceled(handle, "stop all")
        for child in (f"{id}:0", f"{id}:0.0"):
            assert await client.executions.status(child) == ExecutionStatus.CANCELED
    finally:
        stop(*workers)
    lines = (tmp_path / "ledger").read_text().splitlines()
    assert lines == ["cleanup level 1", "cleanup level 2", "cleanup level 3"]


@pytest.mark.slow
async def test_kill_9_during_cleanup_repeats_no_finished_cleanup_step(mode_env, tmp_path, client):
    ttl = {"TTL": "2"}
    first = start(tmp_path, mode_env, **ttl)
    try:
        id = f"kill-{uuid.uuid4().hex[:6]}"
        handle = client.options(target=group_of(mode_env)).rpc(id, "two_cleanups")
        await handle.started()
        await until(ExecutionStatus.SUSPENDED, client, id)
        await client.cancel(id, reason="abort")
        wait_for(tmp_path / "ledger", "start cleanup 2")
    finally:
        stop(first)  # SIGKILL, mid-cleanup
    (tmp_path / "gate").touch()
    second = start(tmp_path, mode_env, **ttl)
    try:
        await canceled(handle, "abort")
    finally:
        stop(second)
    # cleanup 2 was cut off before its effect and ran again; nothing finished ran twice.
    assert ledger(tmp_path / "ledger") == {
        "cleanup 1": 1,
        "start cleanup 2": 2,
        "cleanup 2": 1,
        "cleanup 3": 1,
    }


# -- in one process: timeouts, detached children, termination, races ---------------------------

NOTES: list[str] = []


def note(line: str) -> str:
    NOTES.append(line)
    return line


async def lingering(ctx: Context, seconds: float) -> str:
    try:
        await ctx.sleep(seconds)
    except CanceledError:
        async with ctx.shield():
            await ctx.run(note, f"cleanup {ctx.id}")
        raise
    return await ctx.run(note, f"woke {ctx.id}")


async def with_detached(ctx: Context) -> str:
    ctx.detached(lingering, 1.5)
    return await ctx.run(lingering, 3600)


async def quick(ctx: Context, n: int) -> str:
    try:
        await ctx.run(note, f"step {ctx.id}")
        await ctx.sleep(0.3 * (n % 4))
    except CanceledError:
        async with ctx.shield():
            await ctx.run(note, f"cleanup {ctx.id}")
        raise
    return f"done {n}"


@pytest.fixture
async def app(mode_env: dict[str, str]) -> AsyncIterator[Troth]:
    NOTES.clear()
    app = Troth(
        url=mode_env.get("TROTH_URL"), group=group_of(mode_env), db=mode_env.get("TROTH_DB")
    )
    for fn in (lingering, with_detached, quick):
        app.register(fn)
    async with app:
        yield app


@pytest.mark.slow  # over a second of real time
async def test_a_timeout_with_grace_cancels_in_time_for_cleanup(app: Troth, uid: str):
    """Its deadline is 4 s away; with 3 s of grace it is canceled after 1 s, with a
    ``TimedOutError`` as the reason, and its cleanup is recorded before the deadline."""
    started = time.monotonic()
    handle = app.options(timeout=4, grace=3).run(uid, lingering, 3600)
    with pytest.raises(CanceledError) as e:
        await asyncio.wait_for(handle.result(), 20)
    assert isinstance(e.value.reason, TimedOutError), e.value
    assert 0.9 < time.monotonic() - started < 4
    assert [f"cleanup {uid}"] == NOTES
    assert await app.executions.status(uid) == ExecutionStatus.CANCELED


async def test_grace_needs_a_deadline(app: Troth, uid: str):
    with pytest.raises(ValueError, match="grace option needs a deadline"):
        app.options(grace=3).run(uid, lingering, 1)


@pytest.mark.slow  # over a second of real time
async def test_detached_children_are_left_alone_unless_asked(app: Troth, uid: str):
    for detached in (False, True):
        NOTES.clear()
        id = f"{uid}{int(detached)}"
        handle = app.run(id, with_detached)
        await until(ExecutionStatus.SUSPENDED, app, f"{id}:0")
        await app.cancel(id, reason="stop", detached=detached)
        await canceled(handle, "stop")
        child = app.get(f"{id}:0")
        if detached:
            with pytest.raises(CanceledError):
                await asyncio.wait_for(child.result(), 20)
            assert sorted(NOTES) == [f"cleanup {id}:0", f"cleanup {id}:1"]
        else:
            assert await asyncio.wait_for(child.result(), 20) == f"woke {id}:0"
            assert sorted(NOTES) == [f"cleanup {id}:1", f"woke {id}:0"]


async def test_termination_ends_the_root_at_once_without_cleanup(app: Troth, uid: str):
    """``app.promises.cancel`` is the hard stop: the promise is settled, nothing runs."""
    handle = app.run(uid, lingering, 3600)
    await until(ExecutionStatus.SUSPENDED, app, uid)
    await app.promises.cancel(uid, "terminated")
    error = await canceled(handle, "terminated")
    assert error.promise_id == uid
    await asyncio.sleep(0.5)
    assert NOTES == []


async def test_cancel_of_an_unknown_or_ended_execution(app: Troth, uid: str):
    with pytest.raises(ServerError, match="404"):
        await app.cancel(f"{uid}-nothing")
    await app.promises.create(f"{uid}-plain", timeout=60)
    with pytest.raises(ServerError, match="not an execution"):
        await app.cancel(f"{uid}-plain")
    handle = app.run(uid, quick, 0)
    assert await handle.result() == "done 0"
    await app.cancel(uid, reason="too late")  # nothing to do
    assert await handle.result() == "done 0"


async def test_cancel_racing_completion_has_one_outcome_that_the_handle_reports(
    app: Troth, uid: str
):
    ids = [f"{uid}-{n}" for n in range(16)]
    handles = [app.run(id, quick, n) for n, id in enumerate(ids)]
    await asyncio.gather(*(handle.started() for handle in handles))
    for n, id in enumerate(ids):
        await asyncio.sleep(0.01 * (n % 5))
        if n % 2:
            await app.cancel(id, reason="race")
        else:
            await handles[n].cancel("race")
    outcomes = {}
    for n, (id, handle) in enumerate(zip(ids, handles, strict=True)):
        try:
            outcomes[id] = await asyncio.wait_for(handle.result(), 20)
            assert outcomes[id] == f"done {n}"
            assert await app.executions.status(id) == ExecutionStatus.RESOLVED
            assert f"cleanup {id}" not in NOTES
        except CanceledError as e:
            outcomes[id] = "canceled"
            assert e.reason == "race"
            assert await app.executions.status(id) == ExecutionStatus.CANCELED
        # Both again, from the record: the same outcome.
        again = app.get(id)
        try:
            assert await again.result() == outcomes[id]
        except CanceledError:
            assert outcomes[id] == "canceled"
    for id in ids:
        assert NOTES.count(f"step {id}") <= 1 and NOTES.count(f"cleanup {id}") <= 1
    # Both outcomes occur: the ones with no sleep finish first, the longest sleeps lose.
    assert "canceled" in outcomes.values() and "done 0" in outcomes.values(), outcomes


async def shielded_cleanup(ctx: Context) -> str:
    try:
        await ctx.sleep(3600)
    except CanceledError:
        try:
            await ctx.run(note, "unshielded")  # refused: the cancellation still holds
        except CanceledError:
            note("refused")
        async with ctx.shield():
            await ctx.sleep(1.0)  # a durable wait that a cancellation does not cut short
            await ctx.run(note, "cleaned up")
        raise
    return "woke"


FAILURES: list[int] = []


def failing(n: int) -> int:
    FAILURES.append(n)
    raise ConnectionError("down")


async def retrying(ctx: Context) -> int:
    return await ctx.options(retry=Constant(30.0, max_attempts=5)).run(failing, 1)


@pytest.mark.slow  # over a second of real time
async def test_a_shield_runs_its_calls_and_outside_it_calls_are_refused(app: Troth, uid: str):
    app.register(shielded_cleanup)
    handle = app.run(uid, shielded_cleanup)
    await until(ExecutionStatus.SUSPENDED, app, uid)
    await app.cancel(uid, reason="first")
    await asyncio.sleep(0.3)
    await app.cancel(uid, reason="second")  # during the cleanup: changes nothing
    await canceled(handle, "first")
    # The workflow's own code runs again on replay (after the shielded sleep); steps do not.
    assert NOTES.count("cleaned up") == 1 and "unshielded" not in NOTES
    assert NOTES[0] == "refused" and NOTES[-1] == "cleaned up"
    refused = await app.promises.get(f"{uid}:1")
    assert refused.tags["troth:canceled"] == "true" and refused.tags["troth:step"] == "run:note"


async def test_a_step_waiting_to_retry_is_given_up_at_once(app: Troth, uid: str):
    FAILURES.clear()
    app.register(retrying)
    handle = app.run(uid, retrying)
    await until(ExecutionStatus.RUNNING, app, uid)
    while not FAILURES:
        await asyncio.sleep(0.02)
    started = time.monotonic()
    await asyncio.sleep(0.7)  # the run listens from 0.5 s on
    await app.cancel(uid, reason="enough")
    await canceled(handle, "enough")
    assert time.monotonic() - started < 10 and FAILURES == [1]


async def forgiving(ctx: Context) -> str:
    try:
        await ctx.sleep(3600)
    except CanceledError:
        return "stopped early"  # returning normally: the child ends resolved
    return "slept"


async def after_forgiving(ctx: Context) -> str:
    got = await ctx.run(forgiving)
    note(got)
    await ctx.sleep(0)  # over at once, yet refused: the execution is canceled
    return got


async def test_a_child_may_return_normally_and_the_parent_stops_at_its_next_call(
    app: Troth, uid: str
):
    app.register(forgiving)
    app.register(after_forgiving)
    handle = app.run(uid, after_forgiving)
    await until(ExecutionStatus.SUSPENDED, app, uid)
    await app.cancel(uid, reason="enough")
    await canceled(handle, "enough")
    assert await app.get(f"{uid}:0").result() == "stopped early"
    assert "stopped early" in NOTES
