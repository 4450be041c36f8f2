"""``troth worker module:app``: run an app's worker loop as a process of its own.

The app object is imported (``module:attribute``, as uvicorn does), started, and kept
running until SIGINT or SIGTERM; stopping releases the tasks it holds so that another
worker resumes them at once instead of after their leases lapse. The loop is uvloop's when
it is installed (the ``server`` extra brings it): a worker's CPU per step is mostly the
event loop and its HTTP exchanges, which uvloop makes cheaper.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import signal
import sys
from collections.abc import Callable

from troth.sdk.app import Troth
from troth.sdk.errors import ServerError
from troth.sdk.http import server_urls


def load_app(spec: str) -> Troth:
    module_name, _, attribute = spec.partition(":")
    if not module_name:
        raise ValueError(f"expected module:app, got {spec!r}")
    module = importlib.import_module(module_name)
    app = getattr(module, attribute or "app", None)
    if not isinstance(app, Troth):
        raise ValueError(f"{spec!r} is not a troth app (found {type(app).__name__})")
    return app


async def serve(app: Troth) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with app:
        logging.getLogger(__name__).info(
            "worker %s serving %s for group %r (%s)",
            app.pid,
            ", ".join(app.registry.names()) or "no functions",
            app.group,
            app.mode,
        )
        await stop.wait()


def worker_main(spec: str, url: str | None = None, group: str | None = None) -> int:
    """Entry point for the CLI's ``worker`` command; returns the process exit code.

    ``url`` and ``group`` (``--url``, ``--group``, else TROTH_URL and TROTH_GROUP, as the
    help says) win over what the app module chose: they are set as TROTH_URL/TROTH_GROUP
    before it is imported (for an app built from the environment) and on the app after
    (for one that names its own group, as every example does)."""
    url = url or os.environ.get("TROTH_URL") or None
    group = group or os.environ.get("TROTH_GROUP") or None
    # Import the user's module from the directory the worker was started in, as ``python -m``
    # does: ``troth worker shop:app`` next to shop.py, ``troth worker examples.hello:app``
    # from the repository root.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    # What a worker does is logged at INFO (tasks taken, finished, released); the poll
    # stream's requests, which httpx logs at INFO one by one, are noise at that level.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    if url is not None:
        try:
            url = ",".join(server_urls(url))
        except ValueError as e:
            print(f"troth worker: {e}", file=sys.stderr)
            return 2
        os.environ["TROTH_URL"] = url
    if group is not None:
        os.environ["TROTH_GROUP"] = group
    try:
        app = load_app(spec)
    except ImportError as e:
        print(f"troth worker: {e} (imported from {os.getcwd()})", file=sys.stderr)
        return 2
    except ValueError as e:
        print(f"troth worker: {e}", file=sys.stderr)
        return 2
    if url is not None:
        app.url = url
    if group is not None:
        app.group = group
    try:
        with asyncio.Runner(loop_factory=loop_factory()) as runner:
            runner.run(serve(app))
    except ServerError as e:
        # Only starting raises it: an embedded app whose database file cannot be opened.
        print(f"troth worker: {e.message}", file=sys.stderr)
        return 1
    return 0


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop when it is installed, else asyncio's own."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop
