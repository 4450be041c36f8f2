"""The console in a real headless Chromium, against a real ``troth serve`` and real worker
processes: three workflows (one failing and retrying, one halted by a changed step, one
sleeping) as an operator sees and steers them.

Screenshots of the main pages are saved to the artifacts folder (``conftest.artifacts``);
``docs/images/console-*.png`` are copies of them.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.processes import start, wait_for, worker, write_module
from tests.support.servers import TrothServer

pytestmark = [pytest.mark.browser, pytest.mark.slow]

playwright = pytest.importorskip("playwright.sync_api")
expect = playwright.expect
expect.set_options(timeout=15_000)  # a busy machine; a passing check returns at once

SHOP = """
from troth import Constant

CHANGED = os.environ.get("SHOP_CHANGED") == "1"  # the deploy that breaks ``ship``'s replay


def charge(cents: int) -> str:
    record("charge")
    if LEDGER.read_text().splitlines().count("charge") <= 2:
        raise RuntimeError(f"card declined for {cents} cents")
    return f"receipt for {cents} cents"


@app.register
async def checkout(ctx: Context, cents: int) -> str:
    return await ctx.options(retry=Constant(1.0, max_attempts=5)).run(charge, cents)


def pack(order: str) -> str:
    return f"{order} packed"


def pack_gift(order: str) -> str:
    return f"{order} gift-wrapped"


@app.register
async def ship(ctx: Context, order: str) -> str:
    packed = await ctx.run(pack_gift if CHANGED else pack, order)
    record("packed")
    await ctx.sleep(6)
    return f"{packed} and shipped"


@app.register
async def nap(ctx: Context) -> str:
    await ctx.sleep(3600)
    return "rested"
"""

STARTER = """
import json

async def main() -> None:
    async with app:
        for id, name, *args in json.loads(sys.argv[1]):
            await app.options(target="default").rpc(id, name, *args).started()

asyncio.run(main())
"""


class Shop:
    """The server, the folder of the app's modules, and the worker process serving it."""

    def __init__(self, server: TrothServer, folder: Path) -> None:
        self.server = server
        self.folder = folder
        self.ledger = folder / "ledger"
        write_module(folder, "shop", SHOP)
        write_module(folder, "starter", STARTER)
        self.worker: subprocess.Popen[bytes] | None = None

    def env(self, **extra: str) -> dict[str, str]:
        return {"TROTH_URL": self.server.url, "LEDGER": str(self.ledger), **extra}

    def deploy(self, changed: bool) -> None:
        """Replace the worker by one running the original code, or the changed one."""
        self.stop()
        env = self.env(SHOP_CHANGED="1" if changed else "0")
        self.worker = worker(self.folder, env, "shop:app", log=self.folder / "worker.log")

    def start(self, *executions: list[Any]) -> None:
        import json

        process = start(
            self.folder, self.env(TROTH_GROUP="starter"), "starter.py", json.dumps(executions)
        )
        output, _ = process.communicate(timeout=30)
        assert process.returncode == 0, output.decode()

    def stop(self) -> None:
        if self.worker is not None:
            self.worker.kill()
            self.worker.wait(10)
            self.worker = None


def reload_until(page: Any, url: str, text: str, timeout: float = 30) -> None:
    """Load ``url`` again until it shows ``text`` (a page without live updates)."""
    deadline = time.monotonic() + timeout
    page.goto(url)
    while text not in page.locator("main").inner_text():
        assert time.monotonic() < deadline, f"{url} never showed {text!r}"
        time.sleep(0.5)
        page.reload()


@pytest.fixture
def shop(tmp_path: Path) -> Iterator[Shop]:
    server = TrothServer(tmp_path / "server.db", tmp_path / "server.log").start()
    shop = Shop(server, tmp_path)
    try:
        yield shop
    finally:
        shop.stop()
        server.close()


def test_an_operator_watches_and_steers_three_executions(
    shop: Shop, page: Any, artifacts: Path
) -> None:
    url = shop.server.url
    shop.server.ok(
        "schedule.create",
        {"id": "nightly-report", "cron": "0 2 * * *", "promiseId": "report-{{.timestamp}}",
         "promiseTimeout": 3_600_000, "promiseParam": {},
         "promiseTags": {"resonate:target": "poll://any@reports"}},
    )  # fmt: skip
    shop.deploy(changed=False)
    shop.start(["checkout-1", "checkout", 1250], ["ship-1", "ship", "order-7"], ["nap-1", "nap"])

    # The failing step: its attempts and their errors show while it retries, then it settles.
    page.goto(f"{url}/console/execution?id=checkout-1")
    expect(page.locator("h1")).to_contain_text("checkout-1")
    tree = page.locator("#live")
    expect(tree).to_contain_text("card declined for 1250 cents", timeout=15_000)
    expect(tree.locator(".node").first).to_have_class(re.compile("state-resolved"), timeout=15_000)
    expect(tree).to_contain_text("attempt 3")
    page.locator("li.node[data-id='checkout-1'] > details > summary").click()
    expect(tree).to_contain_text("receipt for 1250 cents")
    page.screenshot(path=artifacts / "console-execution.png", full_page=True)

    # The changed step: ship suspends in its sleep, the changed code's replay halts it.
    wait_for(shop.ledger, "packed")
    shop.deploy(changed=True)
    reload_until(page, f"{url}/console/halted", "ship-1")
    halted = page.locator("main table")
    expect(halted).to_contain_text("pack_gift")  # the reason names the diverging call
    page.screenshot(path=artifacts / "console-halted.png", full_page=True)

    # The sleeping one is canceled from its page; its tree updates.
    page.goto(f"{url}/console/execution?id=nap-1")
    expect(page.locator("#live")).to_contain_text("sleep")
    page.get_by_role("button", name="Cancel execution").click()
    expect(page.locator("h1")).to_contain_text("Cancel")
    page.get_by_role("button", name="Yes, cancel").click()
    root = page.locator("li.node[data-id='nap-1']")
    expect(root).not_to_have_class(re.compile("state-pending"), timeout=15_000)
    expect(page.locator("li.node[data-id='nap-1'] li.node").first).not_to_have_class(
        re.compile("state-pending")
    )

    # The fix is deployed; continuing the halted execution lets it finish.
    shop.deploy(changed=False)
    page.goto(f"{url}/console/execution?id=ship-1")
    expect(page.locator(".halted")).to_contain_text("pack_gift")
    page.get_by_role("button", name="Continue").click()
    page.get_by_role("button", name="Yes, continue").click()
    expect(page.locator("li.node[data-id='ship-1']").first).to_have_class(
        re.compile("state-resolved"), timeout=30_000
    )
    page.locator("li.node[data-id='ship-1'] > details > summary").click()
    expect(page.locator("#live")).to_contain_text("order-7 packed and shipped")

    # The list finds them by state and function; the schedules page shows the next run.
    page.goto(f"{url}/console?function=checkout")
    expect(page.locator("main table")).to_contain_text("checkout-1")
    expect(page.locator("main table")).not_to_contain_text("ship-1")
    page.goto(f"{url}/console")
    for id in ("checkout-1", "ship-1", "nap-1"):
        expect(page.locator("main table")).to_contain_text(id)
    page.screenshot(path=artifacts / "console-executions.png", full_page=True)
    page.goto(f"{url}/console/schedules")
    expect(page.locator("main table")).to_contain_text("nightly-report")
    expect(page.locator("main table")).to_contain_text("0 2 * * *")
    page.screenshot(path=artifacts / "console-schedules.png", full_page=True)


def test_hostile_values_stay_text_and_an_action_works_from_the_keyboard(
    tmp_path: Path, page: Any
) -> None:
    hostile = '<img src=x onerror="alert(1)">'
    server = TrothServer(tmp_path / "server.db", tmp_path / "server.log").start()
    try:
        id = f"order{hostile}"
        tags = {"resonate:origin": id, "resonate:parent": id, "resonate:branch": id}
        target = {"resonate:target": "poll://any@nobody"}  # a task: an execution nobody runs
        server.create_promise(id, tags={**tags, **target, "troth:func": hostile})
        approval = f"{id}:approval"
        server.create_promise(approval, tags={**tags, "troth:step": "promise"})
        dialogs: list[str] = []
        page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))

        page.goto(f"{server.url}/console")
        expect(page.locator("main table")).to_contain_text(hostile)  # shown as text
        page.get_by_role("link", name=id).click()
        expect(page.locator("h1")).to_contain_text(id)
        assert page.locator("main img").count() == 0
        assert dialogs == []

        # Keyboard only: the skip link first, then open the promise's details and resolve it.
        page.keyboard.press("Tab")
        assert page.evaluate("document.activeElement.textContent") == "Skip to content"
        node = page.locator(f"li.node[data-id='{approval}']")
        node.locator("> details > summary").focus()
        page.keyboard.press("Enter")
        page.keyboard.press("Tab")  # the value field of Resolve
        page.keyboard.press("ControlOrMeta+a")
        page.keyboard.type('{"approved": true}')
        page.keyboard.press("Enter")  # submits Resolve: the confirmation page, its Yes focused
        expect(page.locator("h1")).to_contain_text("Resolve")
        page.keyboard.press("Enter")
        expect(page.locator(f"li.node[data-id='{approval}']")).to_have_class(
            re.compile("state-resolved")
        )
        assert server.ok("promise.get", {"id": approval})["promise"]["state"] == "resolved"
        assert dialogs == []
    finally:
        server.close()
