"""troth's own CPU per request: ``python bench/app_cpu.py [--requests N]``.

``troth serve``'s ASGI app (``troth.server.app.App``, with the default configuration: metrics
on, no auth) called directly, without sockets or uvicorn, by 64 concurrent callers doing
promise create+settle (``bench/server.py``'s bodies) on a fresh SQLite file in ``/dev/shm``
(the sync costs no CPU there, as on a disk). The process's CPU per request, the commit
thread's included, is what troth adds to the HTTP stack's own (the echo's CPU per
request in ``bench/server.py``): the two together are ``troth serve``'s. The callers'
own work (building a scope, collecting the two send events) is counted too; it is small.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from server import promise_op

CALLERS = 64
_HEADERS = [(b"host", b"bench"), (b"content-type", b"application/json")]


async def _measure(requests: int, warmup: int) -> float:
    from troth.server.app import App
    from troth.server.config import ServerConfig
    from troth.server.serve import open_storage

    with tempfile.TemporaryDirectory(dir="/dev/shm", prefix="troth-bench-") as tmp:
        config = ServerConfig(db=str(Path(tmp) / "app.db"), log_level="warning")
        app = App(open_storage(config), config)
        await app.start()

        async def call(body: bytes) -> None:
            answer: list[Any] = []

            async def receive() -> dict[str, Any]:
                return {"type": "http.request", "body": body, "more_body": False}

            async def send(event: Any) -> None:
                answer.append(event)

            headers = [*_HEADERS, (b"content-length", str(len(body)).encode())]
            scope = {"type": "http", "method": "POST", "path": "/", "headers": headers}
            await app(scope, receive, send)
            if answer[0]["status"] != 200:
                raise RuntimeError(f"{answer[0]['status']}: {answer[1]['body']!r}")

        async def caller(name: str, ops: int) -> None:
            for n in range(ops):
                for body in promise_op(f"{name}.{n}"):
                    await call(body)

        await asyncio.gather(*(caller(f"w{i}", warmup) for i in range(CALLERS)))
        ops = max(1, requests // (2 * CALLERS))
        started = time.process_time()
        await asyncio.gather(*(caller(f"c{i}", ops) for i in range(CALLERS)))
        cpu = time.process_time() - started
        await app.stop()
    return cpu / (2 * ops * CALLERS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=20_000)
    args = parser.parse_args()
    from troth.server.serve import loop_factory

    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        seconds = runner.run(_measure(args.requests, warmup=10))
    print(f"troth's app in-process: {seconds * 1e6:.1f} us CPU per request")


if __name__ == "__main__":
    main()
