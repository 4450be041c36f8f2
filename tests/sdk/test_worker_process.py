"""``troth worker module:app`` (``troth.sdk.worker_main``) serving a client in another process."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

from troth.sdk import Troth

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # slow: worker processes, killed or stopped


async def test_a_worker_process_serves_rpcs_from_a_client_that_runs_no_worker(server, tmp_path):
    """...on uvloop's event loop when uvloop is installed (issue 16: a worker's CPU per step
    is mostly its loop and its HTTP exchanges)."""
    group = f"w{uuid.uuid4().hex[:6]}"
    (tmp_path / "workers.py").write_text(
        textwrap.dedent(f"""
            import asyncio

            from troth import Troth, Context

            app = Troth(url={server.url!r}, group={group!r})

            @app.register
            async def greet(ctx: Context, name: str) -> str:
                return await ctx.run(str.upper, name)

            @app.register
            async def loop(ctx: Context) -> str:
                return type(asyncio.get_running_loop()).__module__
        """)
    )
    worker = subprocess.Popen(
        [sys.executable, "-c", "import sys; from troth.sdk import worker_main; "
         "sys.exit(worker_main('workers:app'))"],
        cwd=tmp_path, env=os.environ, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        client = Troth(url=server.url, group="clients")  # never started: it only calls
        handle = client.options(target=group).rpc(f"greet-{group}", "greet", "ana")
        assert await asyncio.wait_for(handle.result(), 20) == "ANA"
        loop = client.options(target=group).rpc(f"loop-{group}", "loop")
        expected = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio.unix_events"
        assert await asyncio.wait_for(loop.result(), 20) == expected
        await client.stop()
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            output = worker.communicate(timeout=10)[0].decode()
        except subprocess.TimeoutExpired:
            worker.kill()
            raise
    assert worker.returncode == 0, output
    assert "serving greet" in output
    # Who ran what, at INFO; the poll stream's requests are not logged one by one.
    assert f"task greet-{group} v1 taken: greet" in output
    assert f"task greet-{group} finished: resolved" in output
    assert "HTTP Request" not in output


def test_worker_main_refuses_what_is_not_an_app(tmp_path):
    (tmp_path / "notapp.py").write_text("app = 42\n")
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from troth.sdk import worker_main; "
         "sys.exit(worker_main('notapp:app'))"],
        cwd=tmp_path, capture_output=True, timeout=30,
    )  # fmt: skip
    assert done.returncode == 2
    assert "is not a troth app" in done.stderr.decode()
    assert time.monotonic() - start < 30
