"""A real ``troth serve`` in a subprocess, the one harness every test that needs a server
process uses.

``TrothServer`` runs ``python -m troth serve --port <free> --host 127.0.0.1 --db <db>`` with
the flags a test asks for, waits for ``GET /ready``, and talks to it with request envelopes.
``serve(backend, folder, *flags)`` starts one on a fresh SQLite file or PostgreSQL database,
for the tests that must hold on both (``BACKENDS``).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.ports import free_port
from tests.support.processes import clean_env

VERSION = "2026-04-01"
FAR = 10**13  # a deadline that never comes during a test (year 2286)
# Tests push to receivers on 127.0.0.1, which the default --push-allow (public) refuses.
LOCAL_PUSH = {"TROTH_PUSH_ALLOW": "public,loopback"}


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def wait_ready(url: str, process: subprocess.Popen[bytes], log: Path, seconds: float = 30) -> None:
    """Wait until the server at ``url`` answers ``GET /ready``; fail with its log if it
    exits or takes longer than ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"the server exited {process.returncode}:\n{log.read_text()}")
        try:
            if httpx.get(f"{url}/ready", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"the server did not become ready in {seconds}s:\n{log.read_text()}")


class TrothServer:
    """One ``troth serve`` process on its own port and database.

    ``db`` is a SQLite file or a ``postgresql://`` URL (a string: as a ``Path`` the URL
    would lose a slash). ``env`` is added to the test run's environment plus
    ``LOCAL_PUSH``; ``as_new_user`` starts from a new user's shell instead (no ``TROTH_*``
    setting, no loopback push), as the docs tests need. ``token`` is sent with every request
    made here; ``preexec_fn`` runs in the child before exec (to set a resource limit, say).
    ``start`` after ``kill`` restarts it on the same port and database.
    """

    _corr = itertools.count(1)

    def __init__(
        self,
        db: Path | str,
        log: Path,
        flags: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        *,
        token: str | None = None,
        as_new_user: bool = False,
        preexec_fn: Callable[[], None] | None = None,
    ) -> None:
        self.db = db
        self.log = log
        self.flags = tuple(flags)
        base = clean_env() if as_new_user else {**LOCAL_PUSH, **os.environ}
        self.env = {**base, **(env or {})}
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.token = token
        self.process: subprocess.Popen[bytes] | None = None
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(base_url=self.url, timeout=10, headers=headers)
        self.preexec_fn = preexec_fn

    def start(self) -> TrothServer:
        command = [
            sys.executable, "-m", "troth", "serve",
            "--port", str(self.port), "--host", "127.0.0.1", "--db", str(self.db),
            *self.flags,
        ]  # fmt: skip
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                command, stdout=log, stderr=log, env=self.env, preexec_fn=self.preexec_fn
            )
        try:
            wait_ready(self.url, self.process, self.log)
        except BaseException:
            self.kill()
            raise
        return self

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs at all."""
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def terminate(self, timeout: float = 15) -> int:
        """SIGTERM, as an operator stops a server; its exit status."""
        assert self.process is not None
        self.process.terminate()
        return self.process.wait(timeout)

    def restart(self) -> TrothServer:
        self.kill()
        return self.start()

    def close(self) -> None:
        self.kill()
        self.http.close()

    # -- requests ---------------------------------------------------------------------------

    def envelope(self, kind: str, data: Any, **head: Any) -> dict[str, Any]:
        return {
            "kind": kind,
            "head": {"corrId": f"t{next(self._corr)}", "version": VERSION, **head},
            "data": data,
        }

    def send(self, kind: str, data: Any | None = None, **head: Any) -> httpx.Response:
        return self.http.post("/", json=self.envelope(kind, {} if data is None else data, **head))

    def call(self, kind: str, data: Any | None = None, **head: Any) -> tuple[int, Any]:
        """(head.status, data) of one request, checking what every response must satisfy."""
        request = self.envelope(kind, {} if data is None else data, **head)
        response = self.http.post("/", json=request)
        body = response.json()
        assert response.headers["content-type"] == "application/json"
        assert body["kind"] == kind
        assert body["head"]["corrId"] == request["head"]["corrId"]
        assert body["head"]["status"] == response.status_code
        return response.status_code, body["data"]

    def ok(self, kind: str, data: Any | None = None, **head: Any) -> Any:
        status, body = self.call(kind, data, **head)
        assert status == 200, body
        return body

    def snap(self) -> dict[str, Any]:
        return self.ok("debug.snap")

    def create_promise(
        self, id: str, timeout_at: int = FAR, tags: dict[str, str] | None = None, **head: Any
    ) -> dict[str, Any]:
        data = {"id": id, "timeoutAt": timeout_at, "tags": tags or {}}
        return self.ok("promise.create", data, **head)["promise"]


# -- on either backend ----------------------------------------------------------------------

BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.pg)]


@contextlib.contextmanager
def serve(
    backend: str, folder: Path, *flags: str, debug: bool = True, **options: Any
) -> Iterator[TrothServer]:
    """A started ``troth serve`` (``--debug`` unless ``debug=False``) on a fresh database of
    ``backend``, stopped (and its database dropped) afterwards. ``options`` are
    ``TrothServer``'s."""
    with contextlib.ExitStack() as stack:
        db: Path | str = folder / "t.db"
        if backend == "postgres":
            # Imported here: psycopg is needed only by the tests that use PostgreSQL.
            from tests.support.postgres import cluster_url, fresh_database

            db = stack.enter_context(fresh_database(cluster_url(), "troth_test"))
        flags = ("--debug", *flags) if debug else flags
        server = TrothServer(db, folder / "server.log", flags, **options)
        stack.callback(server.close)
        yield server.start()
