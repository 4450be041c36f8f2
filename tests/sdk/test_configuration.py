"""Configuration like the ecosystem expects: ``Troth()`` reads TROTH_URL, TROTH_GROUP,
TROTH_DB and TROTH_TOKEN when not given; ``troth worker`` takes ``--url``/``--group`` and
says which mode it runs in; the public API is importable from ``troth``."""

from __future__ import annotations

import asyncio
import signal
import uuid
from pathlib import Path

import pytest

import troth
from tests.support.processes import ledger, start, write_module
from troth import Troth

pytestmark = pytest.mark.anyio


def test_unset_arguments_come_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("TROTH_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("TROTH_GROUP", "payments")
    monkeypatch.setenv("TROTH_TOKEN", "secret")
    app = Troth()
    assert (app.url, app.group, app.token) == ("http://127.0.0.1:9", "payments", "secret")
    assert app.mode == "server http://127.0.0.1:9"
    # Arguments win; a database given means embedded mode whatever TROTH_URL says.
    embedded = Troth(db=str(tmp_path / "x.db"), group="mine")
    assert embedded.url is None and embedded.group == "mine"
    assert embedded.mode == f"embedded, database {tmp_path / 'x.db'}"


def test_troth_db_chooses_the_embedded_file(monkeypatch, tmp_path):
    monkeypatch.delenv("TROTH_URL", raising=False)
    monkeypatch.setenv("TROTH_DB", str(tmp_path / "from-env.db"))
    assert Troth().mode == f"embedded, database {tmp_path / 'from-env.db'}"


def test_the_public_api_is_importable_from_troth():
    from troth import (  # noqa: F401
        CanceledError,
        Constant,
        Context,
        DurableFuture,
        Exponential,
        Handle,
        Linear,
        Never,
        NonDeterminismError,
        Options,
        RemoteError,
        RetryPolicy,
        Saga,
        TimedOutError,
        Troth,
        TrothError,
        UnstorableValueError,
    )

    assert set(troth.__all__) >= {"Troth", "Context", "Handle", "Options", "Never"}


@pytest.mark.slow  # a troth worker process against a troth serve process
async def test_troth_worker_takes_url_and_group_and_says_where_it_runs(server, tmp_path: Path):
    write_module(
        tmp_path,
        "greeter",
        """
        @app.register
        async def greet(ctx: Context, name: str) -> str:
            return f"hello {name}"
        """,
    )
    group = f"cfg{uuid.uuid4().hex[:6]}"
    worker = start(
        tmp_path,
        {"LEDGER": str(tmp_path / "ledger")},  # no TROTH_URL: the flags alone point it
        "-m", "troth", "worker", "greeter:app", "--url", server.url, "--group", group,
    )  # fmt: skip
    try:
        client = Troth(url=server.url, group="callers")
        handle = client.options(target=group).rpc(f"greet-{group}", "greet", "ana")
        assert await asyncio.wait_for(handle.result(), 20) == "hello ana"
        await client.stop()
    finally:
        worker.send_signal(signal.SIGTERM)
        output = worker.communicate(timeout=15)[0].decode()
    assert f"for group {group!r} (server {server.url})" in output
    assert not ledger(tmp_path / "ledger")


@pytest.mark.parametrize("bound", [0, -1, 2.5, "3", True])
def test_max_lease_losses_is_a_positive_int_or_none(bound):
    with pytest.raises(ValueError, match="max_lease_losses must be a positive int or None"):
        Troth(db=":memory:", max_lease_losses=bound)
    assert Troth(db=":memory:", max_lease_losses=None).max_lease_losses is None
    assert Troth(db=":memory:").max_lease_losses == 3
