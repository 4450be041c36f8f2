"""The places a CLI test reaches: a real ``troth serve`` on SQLite or PostgreSQL, or an
embedded database file; and ``troth(...)``, the command run in-process through ``main``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.servers import TrothServer, serve
from troth import Troth
from troth.cli import main
from troth.sdk.client import DurablePromise
from troth.storage.sqlite import SqliteService


@dataclass
class Ran:
    code: int
    out: str
    err: str

    @property
    def json(self) -> Any:
        return json.loads(self.out)


@dataclass
class Place:
    """Where the commands go: ``flags`` name it (``--url URL`` or ``--db PATH``)."""

    name: str
    flags: list[str]
    server: TrothServer | None = None
    db: Path | None = None

    def app(self) -> Troth:
        """An app of this place (not started), to read what the CLI wrote as the SDK does."""
        if self.server is not None:
            return Troth(url=self.server.url)
        return Troth(db=str(self.db))

    def read(self, id: str) -> DurablePromise:
        """Promise ``id`` as the SDK reads it."""

        async def get() -> DurablePromise:
            app = self.app()
            try:
                return await app.promises.get(id)
            finally:
                await app.stop()

        return asyncio.run(get())


@pytest.fixture(autouse=True)
def no_troth_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test run's own TROTH_* settings must not pick the target for a command."""
    for name in ("TROTH_URL", "TROTH_DB", "TROTH_TOKEN", "TROTH_GROUP"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def troth(capsys: pytest.CaptureFixture[str]) -> Any:
    """``troth(*argv)``: the command's exit code, stdout and stderr."""

    def run(*argv: str) -> Ran:
        capsys.readouterr()
        try:
            code = main(list(argv))
        except SystemExit as e:  # argparse: --help, --version, a usage error
            code = int(e.code or 0)
        out, err = capsys.readouterr()
        return Ran(code, out, err)

    return run


def new_database(path: Path) -> Path:
    """An embedded database file, as an app's first start leaves it."""

    async def create() -> None:
        await SqliteService(str(path), owner="embedded").close()

    asyncio.run(create())
    return path


PLACES = [
    pytest.param("sqlite", marks=pytest.mark.slow),
    pytest.param("postgres", marks=[pytest.mark.slow, pytest.mark.pg]),
    "file",
]


@pytest.fixture(scope="module", params=PLACES)
def place(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Place]:
    """One server (or file) for a module's tests, each of which uses ids of its own."""
    tmp_path = tmp_path_factory.mktemp(request.param)
    if request.param == "file":
        db = new_database(tmp_path / "app.db")
        yield Place("file", ["--db", str(db)], db=db)
        return
    with serve(request.param, tmp_path) as server:
        yield Place(request.param, ["--url", server.url], server=server)
