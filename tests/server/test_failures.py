"""Storage failures become 500 envelopes and 503 readiness, and the server keeps serving.

These run the real ``App`` on uvicorn in a thread, over a ``SqliteService`` with one
method made to fail, because a healthy SQLite file cannot be made to fail on demand.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn

from tests.support.ports import free_port
from troth.protocol.envelope import Request
from troth.protocol.responses import Reply
from troth.server import App, ServerConfig
from troth.storage.service import Retriable
from troth.storage.sqlite import SqliteService

# Slow: a troth serve process per test (tests/conformance covers the server in the fast suite).
pytestmark = pytest.mark.slow


class FailingService(SqliteService):
    async def handle(self, request: Request, now: int) -> Reply:
        if request.kind == "promise.get":
            raise RuntimeError("disk on fire")
        if request.kind == "promise.settle":
            raise Retriable("serialization failure")
        return await super().handle(request, now)

    async def snapshot(self):  # type: ignore[override]
        raise RuntimeError("snapshot broke")

    async def ping(self) -> bool:
        return False


@pytest.fixture
def failing_url(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    config = ServerConfig(host="127.0.0.1", port=port, debug=True)
    holder: dict[str, uvicorn.Server] = {}

    def serve() -> None:
        async def main() -> None:
            app = App(FailingService(str(tmp_path / "f.db")), config)
            server = uvicorn.Server(
                uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
            )
            holder["server"] = server
            await server.serve()

        asyncio.run(main())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 10
    while True:
        try:
            httpx.get(f"{url}/health")
            break
        except httpx.HTTPError:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    yield url
    holder["server"].should_exit = True
    thread.join(10)


ERROR_ID = re.compile(r"\(error ([0-9a-f]{12})")


def envelope(kind: str, data: dict) -> dict:
    return {"kind": kind, "head": {"corrId": "c42", "version": "2026-04-01"}, "data": data}


def test_a_service_exception_is_a_500_envelope_and_the_server_keeps_serving(
    failing_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    response = httpx.post(failing_url, json=envelope("promise.get", {"id": "p"}))
    assert response.status_code == 500
    body = response.json()
    assert body["kind"] == "promise.get"
    assert body["head"] == {"corrId": "c42", "status": 500, "version": "2026-04-01"}
    # The body names an error id, and the log has the exception under it; the body does not.
    error = ERROR_ID.search(body["data"])
    assert body["data"].startswith("Internal error") and error, body
    assert "disk on fire" not in response.text
    logged = [r for r in caplog.records if error.group(1) in r.getMessage()]
    assert logged and logged[0].exc_info and "disk on fire" in str(logged[0].exc_info[1])
    create = envelope("promise.create", {"id": "p", "timeoutAt": 10**13})
    assert httpx.post(failing_url, json=create).status_code == 200


def test_a_failing_snapshot_is_a_500_snap_failed(failing_url: str) -> None:
    response = httpx.post(failing_url, json=envelope("debug.snap", {}))
    assert response.status_code == 500
    assert response.json()["data"].startswith("Snap failed (error ")
    assert "snapshot broke" not in response.text


def test_ready_is_503_when_storage_does_not_answer(failing_url: str) -> None:
    assert httpx.get(f"{failing_url}/ready").status_code == 503
    assert httpx.get(f"{failing_url}/health").status_code == 200


def test_a_retriable_failure_is_a_503_envelope_with_retry_after(failing_url: str) -> None:
    settle = envelope("promise.settle", {"id": "p", "state": "resolved"})
    response = httpx.post(failing_url, json=settle)
    assert response.status_code == 503
    assert response.headers["retry-after"] == "1"
    body = response.json()
    assert (body["kind"], body["head"]["corrId"], body["head"]["status"]) == (
        "promise.settle",
        "c42",
        503,
    )
    assert body["data"].startswith("Temporarily unavailable") and ERROR_ID.search(body["data"])
    assert "serialization failure" not in response.text
