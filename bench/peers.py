"""The SDK benchmark's peers, DBOS and Restate: installed on first use, Restate started.

Each peer lives outside the repository, in a folder of its own under ``$TMPDIR`` made the
first time it is needed and reused after (``troth-bench-dbos``: a venv with ``dbos``;
``troth-bench-restate``: the ``restate-server`` binary from npm and a venv with
``restate-sdk`` and ``hypercorn``). A folder counts as installed only once its install
finished (a marker file), so an interrupted install is redone, not half used.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESTATE_SERVER = "@restatedev/restate-server@~1.7.0"
RESTATE_PYTHON = ["restate-sdk>=1.2,<2", "hypercorn>=0.17,<1"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def given(path: str) -> str:
    """A program named on the command line, checked now rather than mid-run."""
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"{path} is not an executable file")
    return path


def home(name: str) -> Path:
    return Path(tempfile.gettempdir()) / f"troth-bench-{name}"


def venv_with(folder: Path, packages: list[str]) -> str:
    """The Python of a venv in ``folder`` holding ``packages``, made on first use."""
    python = folder / "venv" / "bin" / "python"
    marker = folder / "venv" / "installed"
    if marker.exists() and marker.read_text() == "\n".join(packages):
        return str(python)
    print(f"making a venv with {', '.join(packages)} in {folder / 'venv'} ...", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", str(folder / "venv")], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", *packages], check=True)
    marker.write_text("\n".join(packages))
    return str(python)


def dbos_python(path: str | None) -> str:
    """The Python to run DBOS with: the one given, or a venv made for it on first use."""
    return given(path) if path else venv_with(home("dbos"), ["dbos"])


def restate_server(path: str | None) -> str:
    """The ``restate-server`` binary: the one given, or the npm package's, installed on
    first use. The binary itself, not npm's ``bin`` wrapper, which is a node process that
    would stand between the bench and the server's exit and signals."""
    if path:
        return given(path)
    folder = home("restate")
    binaries = sorted(folder.glob("node_modules/@restatedev/restate-server-*/bin/restate-server"))
    if not binaries:
        print(f"installing {RESTATE_SERVER} in {folder} ...", file=sys.stderr)
        folder.mkdir(exist_ok=True)
        npm = ["npm", "install", "--prefix", str(folder), "--no-audit", "--no-fund"]
        subprocess.run([*npm, RESTATE_SERVER], check=True, stdout=sys.stderr)
        binaries = sorted(
            folder.glob("node_modules/@restatedev/restate-server-*/bin/restate-server")
        )
        if not binaries:
            raise RuntimeError(f"npm installed {RESTATE_SERVER}, but no binary for this platform")
    return str(binaries[0])


def restate_python(path: str | None) -> str:
    """The Python to serve the Restate workflows with and call them from."""
    return given(path) if path else venv_with(home("restate"), RESTATE_PYTHON)


def post(url: str, body: object, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(
        url,
        json.dumps(body).encode(),
        {"content-type": "application/json", **(headers or {})},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def get(url: str) -> int:
    with urllib.request.urlopen(url, timeout=1) as response:
        return response.status


def wait_until(ready: Callable[[], bool], processes: dict[str, subprocess.Popen[bytes]],
               logs: Path, what: str) -> None:  # fmt: skip
    """Poll ``ready`` until it holds; fail with the logs if a process exits or 30 s pass."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for name, process in processes.items():
            if process.poll() is not None:
                raise RuntimeError(f"{name} exited ({process.returncode}):\n{tail(logs)}")
        try:
            if ready():
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{what} not ready after 30 s:\n{tail(logs)}")


def tail(logs: Path) -> str:
    return "\n".join(
        f"--- {log.name}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-20:])
        for log in sorted(logs.glob("*.log"))
    )


class Restate:
    """A fresh Restate: ``restate-server`` on free ports and a new data folder in
    ``directory``, the bench service (``sdk_restate:app``) on hypercorn, registered as a
    deployment, and one call through the ingress answered before the bench begins."""

    def __init__(self, server: str, python: str, directory: Path) -> None:
        ingress, admin, node, service = (free_port() for _ in range(4))
        self.ingress = f"http://127.0.0.1:{ingress}"
        self.directory = directory
        environment = {
            **os.environ,
            "RESTATE_INGRESS__BIND_ADDRESS": f"127.0.0.1:{ingress}",
            "RESTATE_ADMIN__BIND_ADDRESS": f"127.0.0.1:{admin}",
            "RESTATE_BIND_ADDRESS": f"127.0.0.1:{node}",
        }
        commands = {
            "restate-server": (
                [server, "--no-logo", "--listen-mode", "tcp", "--node-name", "bench",
                 "--base-dir", str(directory / "restate-data")],
                environment,
            ),
            "hypercorn": (
                [python, "-m", "hypercorn", "--bind", f"127.0.0.1:{service}", "sdk_restate:app"],
                {**os.environ, "PYTHONPATH": str(HERE)},
            ),
        }  # fmt: skip
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        try:
            for name, (command, env) in commands.items():
                with open(directory / f"{name}.log", "wb") as log:
                    self.processes[name] = subprocess.Popen(
                        command, stdout=log, stderr=log, env=env, cwd=directory
                    )
            admin_url = f"http://127.0.0.1:{admin}"
            wait_until(lambda: get(f"{admin_url}/health") == 200, self.processes, directory,
                       "restate-server")  # fmt: skip
            deployment = {"uri": f"http://127.0.0.1:{service}"}
            wait_until(lambda: post(f"{admin_url}/deployments", deployment)[0] in (200, 201),
                       self.processes, directory, "registering the deployment")  # fmt: skip
            wait_until(self.answers, self.processes, directory, "the ingress")
        except BaseException:
            self.close()
            raise

    def answers(self) -> bool:
        """A call through the ingress comes back right (the deployment is known to it)."""
        status, body = post(f"{self.ingress}/bench/one_step", 0, {"idempotency-key": "ready"})
        return status == 200 and json.loads(body) == 1

    def close(self) -> None:
        for process in reversed(self.processes.values()):
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
