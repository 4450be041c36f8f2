"""Several ``troth serve`` processes on one PostgreSQL database, and worker processes.

Each server is the real CLI in a subprocess (``tests.support.servers.TrothServer``) with
``--db postgresql://…``; workers run ``python -m troth worker flow:app`` and are told the
servers' URLs in their own order, so that each starts on a different server and fails over
to the next.
"""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path

from tests.support import processes
from tests.support.servers import TrothServer

HERE = Path(__file__).parent


class Cluster:
    def __init__(self, db_url: str, workdir: Path, size: int, flags: tuple[str, ...] = ()):
        self.workdir = workdir
        self.servers = [TrothServer(db_url, workdir / f"server{i}.log", flags) for i in range(size)]
        self.workers: list[subprocess.Popen[bytes]] = []

    def start(self) -> Cluster:
        for server in self.servers:
            server.start()
        return self

    def urls(self, first: int) -> list[str]:
        """Every server's URL, starting with server ``first``, then round the ring."""
        n = len(self.servers)
        return [self.servers[(first + i) % n].url for i in range(n)]

    def start_worker(self, first: int) -> subprocess.Popen[bytes]:
        """A worker process of ``flow:app`` that connects to server ``first`` first."""
        log = self.workdir / f"worker{len(self.workers)}.log"
        env = {"TROTH_URL": ",".join(self.urls(first))}
        process = processes.worker(HERE, env, "flow:app", log=log)
        self.workers.append(process)
        return process

    def fired(self) -> int:
        """Timeout transitions fired, summed over every server's (debug) log."""
        return sum(
            int(count)
            for server in self.servers
            for count in re.findall(r"fired (\d+) timeouts at", server.output())
        )

    def logs(self) -> str:
        return "\n".join(
            f"--- {path.name}\n{path.read_text(errors='replace')[-3000:]}"
            for path in sorted(self.workdir.glob("*.log"))
        )

    def close(self) -> None:
        for worker in self.workers:
            if worker.poll() is None:
                worker.send_signal(signal.SIGTERM)
        for worker in self.workers:
            try:
                worker.wait(10)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()
        for server in self.servers:
            server.close()
