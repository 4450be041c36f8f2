"""A headless Chromium for the console's browser tests, and where their screenshots go.

Chromium is Debian's (``apt-get install chromium``, done by ``.ci/run``), driven by
Playwright's Python package through ``executable_path``: Playwright's own browser build
cannot be downloaded here. Each test gets a fresh browser profile. Screenshots go to
``$TROTH_ARTIFACTS/console`` (default ``artifacts/console`` in the repo, ignored by git).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("TROTH_CHROMIUM", "/usr/bin/chromium")
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def page(tmp_path: Path) -> Iterator[object]:
    """A page of a fresh headless Chromium (its own user-data dir)."""
    if not shutil.which(CHROMIUM):
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"),
            executable_path=CHROMIUM,
            args=FLAGS,
            headless=True,
            viewport={"width": 1280, "height": 860},
            timeout=60_000,  # a busy CI machine starts a browser slowly
        )
        # Generous waits: CI runs these beside other process-heavy tests.
        context.set_default_timeout(20_000)
        try:
            yield context.pages[0] if context.pages else context.new_page()
        finally:
            context.close()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    folder = Path(os.environ.get("TROTH_ARTIFACTS", ROOT / "artifacts")) / "console"
    folder.mkdir(parents=True, exist_ok=True)
    return folder
