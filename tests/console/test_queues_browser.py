"""The console's Queues pages in a real headless Chromium against a real ``troth serve``:
from the navigation to a queue, its busiest keys, and a queued execution's place."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.servers import TrothServer

pytestmark = [pytest.mark.browser, pytest.mark.slow]

playwright = pytest.importorskip("playwright.sync_api")
expect = playwright.expect


def test_an_operator_finds_a_queue_its_keys_and_where_an_execution_waits(
    tmp_path: Path, page: Any, artifacts: Path
) -> None:
    server = TrothServer(tmp_path / "server.db", tmp_path / "server.log").start()
    try:
        server.ok("queue.set", {"queue": {"name": "llm", "concurrency": 1}})
        for id, key in (("acme-1", "acme"), ("acme-2", "acme"), ("globex-1", "globex")):
            server.create_promise(id, tags={
                "resonate:origin": id, "resonate:target": "poll://any@nobody",
                "troth:queue": "llm", "troth:queue-key": key,
            })  # fmt: skip
        page.goto(f"{server.url}/console")
        page.get_by_role("link", name="Queues").click()
        expect(page.locator("main table")).to_contain_text("concurrency 1")
        page.get_by_role("link", name="llm").click()
        expect(page.locator("h1")).to_contain_text("llm")
        keys = page.locator("main table")
        expect(keys).to_contain_text("acme")
        expect(keys).to_contain_text("globex")
        page.screenshot(path=artifacts / "console-queue.png", full_page=True)
        page.goto(f"{server.url}/console/execution?id=globex-1")
        expect(page.locator("dl.summary")).to_contain_text(
            "queued (position 1, waiting for key 'globex')"
        )
    finally:
        server.close()
