"""The SDK benchmark: ``python bench/sdk.py [--quick] [--dbos-python PATH]``.

A 1-step and a 10-step workflow (each step a ``ctx.run`` of a cheap ``def``), 1,000
executions per case (100 with ``--quick``), with 1 and 16 concurrent callers:

1. troth embedded: the engine in the app's process on a fresh SQLite file;
2. troth remote: the app against a ``troth serve`` subprocess on a fresh SQLite file
   (both with SQLite's ``synchronous=FULL``, troth's default);
3. DBOS, the peer baseline, on its default SQLite system database, in a venv of its own.

It prints workflows/s, steps/s and p50/p99 latency per case, then the ratios troth/DBOS.
Each system runs in a process of its own (``sdk_troth.py``, ``sdk_dbos.py``), one after
the other. Without ``--dbos-python`` a venv with ``dbos`` is made (once) in
``$TMPDIR/troth-bench-dbos``; ``--no-dbos`` skips the baseline. Figures on a small shared
machine are noisy: compare ratios from one run, not absolute numbers across runs.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dbos_python(path: str | None) -> str:
    """The Python to run DBOS with: the one given, or a venv made for it on first use."""
    if path:
        return path
    venv = Path(tempfile.gettempdir()) / "troth-bench-dbos"
    python = venv / "bin" / "python"
    if not python.exists():
        print(f"making a venv with dbos in {venv} ...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "dbos"], check=True)
    return str(python)


class Server:
    """``troth serve`` on a free port and a fresh database file in ``directory``."""

    def __init__(self, directory: Path) -> None:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.log = directory / "server.log"
        command = [
            sys.executable, "-m", "troth", "serve", "--host", "127.0.0.1", "--port", str(port),
            "--db", str(directory / "server.db"), "--log-level", "warning",
        ]  # fmt: skip
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=log)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"troth serve exited:\n{self.log.read_text()}")
            try:
                with urllib.request.urlopen(f"{self.url}/ready", timeout=1) as response:
                    if response.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        self.close()
        raise RuntimeError("troth serve did not become ready")

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def run_cases(command: list[str], cwd: Path) -> list[dict[str, Any]]:
    """Run one workload process; its cases, one JSON object per stdout line."""
    print("$", " ".join(command), file=sys.stderr, flush=True)
    done = subprocess.run(command, cwd=cwd, stdout=subprocess.PIPE, text=True, check=True)
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def summary(case: dict[str, Any]) -> dict[str, Any]:
    latencies = sorted(case["latencies"])
    rate = case["n"] / case["seconds"]
    quantiles = statistics.quantiles(latencies, n=100, method="inclusive")
    return {
        "system": f"{case['system']} {case['mode']}",
        "steps": case["steps"],
        "callers": case["callers"],
        "n": case["n"],
        "wf/s": rate,
        "steps/s": rate * case["steps"],
        "p50 ms": statistics.median(latencies) * 1000,
        "p99 ms": quantiles[98] * 1000,
    }


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        f"{'system':<16} {'steps':>5} {'callers':>7} {'n':>5} {'wf/s':>8} {'steps/s':>8} "
        f"{'p50 ms':>8} {'p99 ms':>8}"
    ]
    for r in rows:
        lines.append(
            f"{r['system']:<16} {r['steps']:>5} {r['callers']:>7} {r['n']:>5} {r['wf/s']:>8.1f} "
            f"{r['steps/s']:>8.0f} {r['p50 ms']:>8.1f} {r['p99 ms']:>8.1f}"
        )
    return "\n".join(lines)


def ratios(rows: list[dict[str, Any]]) -> str:
    """Throughput and p50 latency of each troth mode against DBOS, case by case."""
    dbos = {(r["steps"], r["callers"]): r for r in rows if r["system"].startswith("dbos")}
    lines = [f"{'troth / DBOS':<16} {'steps':>5} {'callers':>7} {'wf/s x':>8} {'p50 x':>8}"]
    for r in rows:
        base = dbos.get((r["steps"], r["callers"]))
        if base is None or r["system"].startswith("dbos"):
            continue
        lines.append(
            f"{r['system']:<16} {r['steps']:>5} {r['callers']:>7} "
            f"{r['wf/s'] / base['wf/s']:>8.2f} {r['p50 ms'] / base['p50 ms']:>8.2f}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 executions per case")
    parser.add_argument("--n", type=int, help="executions per case (default 1000)")
    parser.add_argument("--dbos-python", help="a Python with dbos installed")
    parser.add_argument("--no-dbos", action="store_true", help="skip the DBOS baseline")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    n = args.n or (100 if args.quick else 1000)
    common = ["--n", str(n), "--callers", "1,16", "--steps", "1,10"]
    cases: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="troth-bench-sdk-") as tmp:
        directory = Path(tmp)
        troth = [sys.executable, str(HERE / "sdk_troth.py")]
        db = str(directory / "embedded.db")
        cases += run_cases([*troth, "embedded", "--db", db, *common], directory)
        server = Server(directory)
        try:
            cases += run_cases([*troth, "remote", "--url", server.url, *common], directory)
        finally:
            server.close()
        if not args.no_dbos:
            scratch = directory / "dbos"
            scratch.mkdir()
            python = dbos_python(args.dbos_python)
            cases += run_cases([python, str(HERE / "sdk_dbos.py"), *common], scratch)
    rows = [summary(case) for case in cases]
    print(f"\nSDK benchmark, {n} executions per case, {os.cpu_count()} CPUs\n")
    print(table(rows))
    if not args.no_dbos:
        print()
        print(ratios(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
