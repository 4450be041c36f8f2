"""An exception raised in a step or a workflow reaches the code that awaits it as the same
class with the same attributes — custom ``__init__``, chained causes and exception groups
included — whenever that class is loaded in the receiving process; only an unknown class
becomes ``RemoteError``, named by its module and qualified name."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.processes import worker, write_module
from troth.protocol.records import PromiseRecord, PromiseState, Value
from troth.sdk import Context, Never, RemoteError, Troth
from troth.sdk.codec import Codec, encode_error, error_from_json, error_to_json, result_of
from troth.sdk.errors import AttemptInterruptedError, TimedOutError

pytestmark = pytest.mark.anyio

WAIT = 20  # seconds a remote test may take before it is a failure


class PaymentDeclined(Exception):
    def __init__(self, order: str, cents: int) -> None:
        super().__init__(f"declined {order}")
        self.order = order
        self.cents = cents


class GatewayDown(Exception):
    def __init__(self, gateway: str, *, status: int) -> None:
        super().__init__(f"{gateway} answered {status}")
        self.gateway = gateway
        self.status = status


class Opaque:
    """A value the codec cannot encode."""


async def outcome(app: Troth, id: str, fn, *args) -> BaseException:
    """The exception the execution ``id`` of ``fn(*args)`` ends with."""
    try:
        value = await asyncio.wait_for(app.run(id, fn, *args).result(), WAIT)
    except Exception as e:
        return e
    pytest.fail(f"{fn.__name__} returned {value!r}")


# -- in one app, embedded and against a server ----------------------------------------------


async def test_a_step_error_with_a_custom_init_is_caught_as_its_class(make_app, uid):
    app = make_app()

    def charge(order: str, cents: int) -> None:
        raise PaymentDeclined(order, cents)

    @app.register
    async def checkout(ctx: Context, order: str) -> list[object]:
        try:
            await ctx.options(retry=Never()).run(charge, order, 1250)
        except PaymentDeclined as e:
            return [type(e).__name__, e.order, e.cents, str(e), e.args[0]]
        return ["not caught"]

    async with app:
        done = app.run(f"{uid}-step", checkout, "o-7").result()
        assert await asyncio.wait_for(done, WAIT) == [
            "PaymentDeclined", "o-7", 1250, "declined o-7", "declined o-7"
        ]  # fmt: skip


async def test_a_workflow_error_reaches_the_caller_as_its_class(make_app, uid):
    app = make_app()

    @app.register
    async def checkout(ctx: Context, order: str) -> None:
        raise PaymentDeclined(order, 99)

    async with app:
        error = await outcome(app, f"{uid}-flow", checkout, "o-8")
    assert type(error) is PaymentDeclined
    assert (error.order, error.cents, str(error)) == ("o-8", 99, "declined o-8")
    assert "raise PaymentDeclined(order, 99)" in error.remote_traceback
    assert "raised remotely" in "".join(error.__notes__)


async def test_a_chained_cause_is_rebuilt_with_its_own_cause(make_app, uid):
    app = make_app()

    def charge(order: str) -> None:
        try:
            try:
                raise TimeoutError("socket read")
            except TimeoutError as e:
                raise GatewayDown("stripe", status=504) from e
        except GatewayDown as e:
            raise PaymentDeclined(order, 10) from e

    @app.register
    async def checkout(ctx: Context, order: str) -> None:
        await ctx.options(retry=Never()).run(charge, order)

    async with app:
        error = await outcome(app, f"{uid}-cause", checkout, "o-9")
    assert type(error) is PaymentDeclined and error.order == "o-9"
    cause = error.__cause__
    assert type(cause) is GatewayDown
    assert (cause.gateway, cause.status, str(cause)) == ("stripe", 504, "stripe answered 504")
    assert type(cause.__cause__) is TimeoutError and str(cause.__cause__) == "socket read"
    assert cause.__cause__.__cause__ is None


async def test_an_exception_group_of_custom_errors_keeps_every_member(make_app, uid):
    app = make_app()

    @app.register
    async def checkout(ctx: Context) -> None:
        raise ExceptionGroup(
            "two payments failed", [PaymentDeclined("a", 1), GatewayDown("adyen", status=503)]
        )

    async with app:
        error = await outcome(app, f"{uid}-group", checkout)
    assert type(error) is ExceptionGroup and error.message == "two payments failed"
    declined, down = error.exceptions
    assert type(declined) is PaymentDeclined and (declined.order, declined.cents) == ("a", 1)
    assert type(down) is GatewayDown and (down.gateway, down.status) == ("adyen", 503)
    # `except*` in the caller matches the members by their class.
    try:
        raise error
    except* PaymentDeclined as matched:
        assert matched.exceptions == (declined,)
    except* GatewayDown:
        pass


# -- the codec ---------------------------------------------------------------------------------


def round_trip(error: BaseException) -> BaseException:
    """``error`` raised, recorded as a rejection and read back."""
    codec = Codec()
    try:
        raise error
    except BaseException as e:
        record = _rejected(encode_error(codec, e))
    try:
        result_of(record, codec)
    except BaseException as e:
        return e
    pytest.fail("not raised")


def _rejected(value: Value) -> PromiseRecord:
    return PromiseRecord("p", PromiseState.REJECTED, Value(), value, {}, 10, 0, 10)


def test_the_sdks_own_errors_keep_their_type():
    interrupted = round_trip(AttemptInterruptedError("flow:3", 2))
    assert type(interrupted) is AttemptInterruptedError
    assert (interrupted.step_id, interrupted.attempt) == ("flow:3", 2)
    timed_out = round_trip(TimedOutError("flow:1", 1_000, "option"))
    assert type(timed_out) is TimedOutError and timed_out.promise_id == "flow:1"
    assert str(timed_out) == str(TimedOutError("flow:1", 1_000, "option"))


def test_builtin_errors_keep_their_fields():
    missing = round_trip(FileNotFoundError(2, "No such file", "/tmp/x"))
    assert type(missing) is FileNotFoundError
    assert (missing.errno, missing.filename) == (2, "/tmp/x")
    assert str(round_trip(KeyError("k"))) == "'k'"


def test_an_attribute_that_cannot_be_encoded_is_left_out_not_the_error():
    error = PaymentDeclined("o-1", 5)
    error.opaque = Opaque()  # type: ignore[attr-defined]
    rebuilt = round_trip(error)
    assert type(rebuilt) is PaymentDeclined and rebuilt.cents == 5
    assert not hasattr(rebuilt, "opaque")
    # An argument that cannot be encoded is kept as its repr, so positions do not shift.
    odd = round_trip(ValueError(Opaque(), "second"))
    assert type(odd) is ValueError and odd.args[1] == "second"
    assert odd.args[0].startswith("<") and "Opaque" in odd.args[0]


class Big(Exception):
    def __init__(self, blob: str) -> None:
        super().__init__(blob)
        self.blob = blob


def test_a_large_attribute_is_recorded_once():
    blob = "x" * 50_000
    encoded = json.dumps(error_to_json(Big(blob)))
    # Once as the message (which the TypeScript SDK reads) and once in the stack text.
    assert encoded.count(blob) == 2
    assert error_from_json(json.loads(encoded)).blob == blob


def test_an_error_holding_a_value_over_the_part_limit_is_recorded_without_it():
    error = PaymentDeclined("o-2", 7)
    error.response = {"body": "y" * 200_000}  # type: ignore[attr-defined]
    rebuilt = round_trip(error)
    assert type(rebuilt) is PaymentDeclined and (rebuilt.order, rebuilt.cents) == ("o-2", 7)
    assert not hasattr(rebuilt, "response")


def test_a_cyclic_cause_chain_is_cut_not_followed_for_ever():
    first, second = PaymentDeclined("a", 1), PaymentDeclined("b", 2)
    first.__cause__, second.__cause__ = second, first
    rebuilt = error_from_json(json.loads(json.dumps(error_to_json(first))))
    depth = 0
    while rebuilt is not None:
        depth, rebuilt = depth + 1, rebuilt.__cause__
    assert 2 <= depth <= 16


def test_a_remote_error_raised_again_passes_the_original_on(monkeypatch):
    """A process without the class (here: its module not loaded yet) re-raises the
    ``RemoteError`` it got; a process with the class rebuilds the original from that."""
    try:
        raise PaymentDeclined("o-3", 30)
    except PaymentDeclined as e:
        record = {**error_to_json(e), "module": "payments_not_loaded"}
    relayed = error_from_json(json.loads(json.dumps(record)))
    assert type(relayed) is RemoteError
    assert relayed.type_name == "payments_not_loaded.PaymentDeclined"
    assert relayed.attributes == {"order": "o-3", "cents": 30}
    try:
        raise relayed
    except RemoteError as e:
        again = json.loads(json.dumps(error_to_json(e)))
    assert (again["name"], again["module"], again["message"]) == (
        "PaymentDeclined", "payments_not_loaded", "declined o-3"
    )  # fmt: skip
    assert "raise PaymentDeclined" in again["stack"]  # the first traceback travels on
    monkeypatch.setitem(sys.modules, "payments_not_loaded", sys.modules[__name__])
    rebuilt = error_from_json(again)
    assert type(rebuilt) is PaymentDeclined and (rebuilt.order, rebuilt.cents) == ("o-3", 30)


def test_a_control_signal_is_never_rebuilt_from_data():
    obj = {"__type": "error", "name": "Suspended", "module": "troth.sdk.errors", "message": ""}
    assert type(error_from_json(obj)) is RemoteError


# -- across processes ------------------------------------------------------------------------

ERRORS = """
class PaymentDeclined(Exception):
    def __init__(self, order: str, cents: int) -> None:
        super().__init__(f"declined {order}")
        self.order = order
        self.cents = cents
"""

APP = """
import {errors}
from troth.sdk import Never

def charge(order: str, cents: int) -> None:
    raise {errors}.PaymentDeclined(order, cents)

@app.register
async def checkout(ctx: Context, order: str, cents: int) -> None:
    await ctx.options(retry=Never()).run(charge, order, cents)
"""


@pytest.fixture
def errors_module(tmp_path: Path) -> Iterator[str]:
    """The name of a fresh module in ``tmp_path`` defining ``PaymentDeclined``, and an app
    module ``shop`` (``checkout``) whose step raises it; the test process imports neither."""
    name = f"errors_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(ERRORS)
    write_module(tmp_path, "shop", APP.format(errors=name))
    (tmp_path / "ledger").touch()
    yield name
    sys.modules.pop(name, None)


@pytest.fixture
def importable(tmp_path: Path) -> Iterator[None]:
    """Modules in ``tmp_path`` can be imported by this process."""
    sys.path.insert(0, str(tmp_path))
    yield
    sys.path.remove(str(tmp_path))


async def checkout_in_a_worker(tmp_path: Path, mode_env: dict[str, str]) -> BaseException:
    """``checkout`` run by a worker process; the exception it ends with, here."""
    env = {**mode_env, "LEDGER": str(tmp_path / "ledger"), "PYTHONPATH": str(tmp_path)}
    process = worker(tmp_path, env, "shop:app")
    client = Troth(url=mode_env.get("TROTH_URL"), group="clients", db=mode_env.get("TROTH_DB"))
    try:
        group = mode_env.get("TROTH_GROUP", "default")
        handle = client.options(target=group).rpc(f"o-{uuid.uuid4().hex[:6]}", "checkout",
                                                  "o-42", 700)  # fmt: skip
        try:
            await asyncio.wait_for(handle.result(), WAIT)
        except Exception as e:
            return e
        pytest.fail("checkout returned")
    finally:
        await client.stop()
        process.send_signal(signal.SIGTERM)
        try:
            process.communicate(timeout=15)
        finally:
            if process.poll() is None:
                process.kill()


@pytest.mark.slow  # a worker process
async def test_a_class_loaded_in_both_processes_crosses_as_itself(
    mode_env, tmp_path, errors_module, importable
):
    module = __import__(errors_module)
    error = await checkout_in_a_worker(tmp_path, mode_env)
    assert type(error) is module.PaymentDeclined
    assert (error.order, error.cents) == ("o-42", 700)
    assert f"raise {errors_module}.PaymentDeclined(order, cents)" in error.remote_traceback


@pytest.mark.slow  # a worker process
async def test_a_class_unknown_here_arrives_as_remote_error_with_its_qualified_name(
    mode_env, tmp_path, errors_module
):
    error = await checkout_in_a_worker(tmp_path, mode_env)
    assert errors_module not in sys.modules
    assert type(error) is RemoteError
    assert error.type_name == f"{errors_module}.PaymentDeclined"
    assert error.message == "declined o-42"
    assert str(error) == f"{errors_module}.PaymentDeclined: declined o-42"
    assert f"raise {errors_module}.PaymentDeclined(order, cents)" in error.remote_traceback
    assert error.attributes == {"order": "o-42", "cents": 700}
