"""Embedded mode refuses what a server refuses, with the server's words, and a failing
database reaches user code as the SDK's own error, never as a raw ``sqlite3`` exception."""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from troth.sdk import Troth
from troth.sdk.errors import ServerError

pytestmark = pytest.mark.anyio

BAD_CALLS: dict[str, Callable[[Troth], Awaitable[Any]]] = {
    "create with an empty id": lambda app: app.promises.create("", timeout=60),
    "get with an empty id": lambda app: app.promises.get(""),
    "resolve with an empty id": lambda app: app.promises.resolve("", 1),
}


async def refusal(app: Troth, call: Callable[[Troth], Awaitable[Any]]) -> tuple[int, str]:
    async with app:
        with pytest.raises(ServerError) as refused:
            await call(app)
    return refused.value.status, refused.value.message


@pytest.mark.parametrize("call", BAD_CALLS.values(), ids=BAD_CALLS.keys())
async def test_an_embedded_app_refuses_a_bad_request_as_the_server_does(call, server, tmp_path):
    embedded = await refusal(Troth(db=str(tmp_path / "troth.db")), call)
    remote = await refusal(Troth(url=server.url), call)
    assert embedded == remote
    assert embedded[0] == 400 and "id" in embedded[1]


async def test_a_failing_database_raises_the_sdks_error_not_sqlites(tmp_path):
    path = str(tmp_path / "troth.db")
    app = Troth(db=path)
    async with app:
        await app.promises.create("before", timeout=60)
        # Another program breaks the file under the running app: every new promise fails.
        with sqlite3.connect(path) as other:
            other.execute(
                "CREATE TRIGGER broken BEFORE INSERT ON promises"
                " BEGIN SELECT RAISE(ABORT, 'the disk is on fire'); END"
            )
        with pytest.raises(ServerError) as failed:
            await app.promises.create("after", timeout=60)
        assert failed.value.status == 500 and "the disk is on fire" in failed.value.message
        assert not isinstance(failed.value.__cause__, sqlite3.Error)
        assert (await app.promises.get("before")).pending  # reads still work


async def test_a_database_that_cannot_be_opened_is_a_server_error(tmp_path):
    app = Troth(db=str(tmp_path / "missing" / "dir" / "troth.db"))
    with pytest.raises(ServerError, match=r"cannot open the database .*missing"):
        await app.start()
