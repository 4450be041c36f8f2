"""Load on a real ``troth serve``, shared by the delivery-load tests and ``bench/delivery.py``:
many promises created at once, a push target that answers 503 to everything, and what the
server process costs in CPU.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from tests.support.ports import free_port
from tests.support.servers import FAR, TrothServer

_TICKS = os.sysconf("SC_CLK_TCK")

# An HTTP/1.1 server answering 503 to every request, with keep-alive, in a process of its
# own so its work does not compete with the measurements of the process that drives it.
_FAILING_TARGET = r"""
import asyncio, sys

async def answer(reader, writer):
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            await reader.readexactly(length)
            writer.write(b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n")
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()

async def main():
    server = await asyncio.start_server(answer, "127.0.0.1", int(sys.argv[1]), backlog=1024)
    print("ready", flush=True)
    await server.serve_forever()

asyncio.run(main())
"""


def cpu_seconds(pid: int) -> float:
    """Process ``pid``'s CPU so far (user + system), from ``/proc/<pid>/stat``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime


@contextlib.contextmanager
def failing_target() -> Iterator[str]:
    """The URL of a push target, in a process of its own, answering 503 to every request."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-c", _FAILING_TARGET, str(port)], stdout=subprocess.PIPE
    )
    try:
        assert process.stdout is not None and process.stdout.readline() == b"ready\n"
        yield f"http://127.0.0.1:{port}"
    finally:
        process.kill()
        process.wait(10)


def create_all(server: TrothServer, ids: list[str], tags: Callable[[str], dict[str, str]]) -> None:
    """Create a promise for each id, several at a time."""

    def create(chunk: list[str]) -> None:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            for id in chunk:
                body = server.envelope(
                    "promise.create", {"id": id, "timeoutAt": FAR, "tags": tags(id)}
                )
                assert http.post("/", json=body).status_code == 200

    chunks = [ids[i::8] for i in range(8)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(create, chunks))
