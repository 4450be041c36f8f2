"""The SDK benchmark: ``python bench/sdk.py [--quick] [--no-dbos] [--no-restate] ...``.

A 1-step and a 10-step workflow (each step a ``ctx.run`` of a cheap ``def``), 1,000
executions per case (100 with ``--quick``), and a 100-step one with a twentieth as many, each
with 1 and 16 concurrent callers, on four systems in one run:

1. troth embedded: the engine in the app's process on a fresh SQLite file;
2. troth remote: the app against a ``troth serve`` subprocess on a fresh SQLite file
   (both with SQLite's ``synchronous=FULL``, troth's default);
3. DBOS, on its default SQLite system database, in a venv of its own;
4. Restate 1.7: ``restate-server`` (from npm) on a fresh data folder, the workflows served
   by its Python SDK on hypercorn, registered as a deployment, called through the ingress.

It prints workflows/s, steps/s and p50/p99 latency per case, the ratios of each troth mode
against each peer, and the issue-16 targets, met or not. ``--inline`` adds the two troth
modes again with the step registered ``inline=True`` (run on the event loop, no thread
hand-off), as rows of their own ("troth embedded inline", "troth remote inline").

Each system runs in processes of its own (``sdk_troth.py``, ``sdk_dbos.py``,
``sdk_restate.py``), case by case: every system runs a case in turn (one workload process
each, the order reversed every other case) against a store that lives for the whole run (the
same SQLite files, ``troth serve`` and Restate), so a change in the machine's load falls on
all of them. The peers are installed on first use outside the repository (``peers.py``);
every peer is set up before anything is measured, and one that cannot be is an error naming
the flag that skips it (``--no-dbos``, ``--no-restate``), never a silent gap in the table.
Figures on a small shared machine are noisy: compare ratios from one run, not numbers across
runs.

``--metrics-cost`` measures instead what the SDK's opt-in metrics cost
(``Troth(metrics=registry)``): the troth cases, embedded and remote (against one fresh
``troth serve``), each variant in a workload process of its own, in two turns (metrics on
then off, then off then on), so load from other jobs falls on both; it prints each case's
best workflows/s with and without and their ratio, and proves the metrics counted every run.

``--replay-check-cost [--batch B]`` measures instead what the replay check costs (issue 8):
the troth cases (embedded, then remote against a fresh ``troth serve``) with the check as
shipped and with it switched off by a bench-only patch (``digest`` in ``troth.sdk.context``
returns None, ``Execution.check`` and ``Context._finish`` do nothing). Both variants run
in one workload process and app, in batches of ``B`` executions (default 100) taking turns
(checked, unchecked, unchecked, checked, ...), so load from other jobs falls on both. It
prints workflows/s, p50 and the workload process's CPU per execution for each variant,
the ratios checked / unchecked, and proves the switch took by counting the stored steps
that carry an argument digest.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import peers

HERE = Path(__file__).resolve().parent


class Server:
    """``troth serve`` on a free port and a fresh database file in ``directory``."""

    def __init__(self, directory: Path) -> None:
        port = peers.free_port()
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
        f"{'system':<21} {'steps':>5} {'callers':>7} {'n':>5} {'wf/s':>8} {'steps/s':>8} "
        f"{'p50 ms':>8} {'p99 ms':>8}"
    ]
    for r in rows:
        lines.append(
            f"{r['system']:<21} {r['steps']:>5} {r['callers']:>7} {r['n']:>5} {r['wf/s']:>8.1f} "
            f"{r['steps/s']:>8.0f} {r['p50 ms']:>8.1f} {r['p99 ms']:>8.1f}"
        )
    return "\n".join(lines)


PEERS = {"dbos": "DBOS", "restate": "Restate"}


def ratios(rows: list[dict[str, Any]], peer: str) -> str:
    """Each troth mode against ``peer``, case by case: throughput (higher is better) and
    p50 and p99 latency (lower is better)."""
    base = {(r["steps"], r["callers"]): r for r in rows if r["system"].startswith(peer)}
    lines = [
        f"{'troth / ' + PEERS[peer]:<21} {'steps':>5} {'callers':>7} {'wf/s x':>8} "
        f"{'p50 x':>8} {'p99 x':>8}"
    ]
    for r in rows:
        b = base.get((r["steps"], r["callers"]))
        if b is None or not r["system"].startswith("troth"):
            continue
        lines.append(
            f"{r['system']:<21} {r['steps']:>5} {r['callers']:>7} {r['wf/s'] / b['wf/s']:>8.2f} "
            f"{r['p50 ms'] / b['p50 ms']:>8.2f} {r['p99 ms'] / b['p99 ms']:>8.2f}"
        )
    return "\n".join(lines)


def targets(rows: list[dict[str, Any]]) -> str:
    """Issue 16's targets for the SDK, each with its figure from this run, met or not."""
    row = {(r["system"], r["steps"], r["callers"]): r for r in rows}
    checks: list[tuple[str, float, str, float]] = []  # (what, figure, comparison, bound)

    def ratio(what: str, mode: str, peer: str, bound: float) -> None:
        ours, theirs = row.get((f"troth {mode}", 10, 16)), row.get((peer, 10, 16))
        if ours and theirs:
            checks.append((what, ours["wf/s"] / theirs["wf/s"], ">=", bound))

    ratio("10 steps, 16 callers: embedded / Restate wf/s", "embedded", "restate server", 4)
    ratio("10 steps, 16 callers: remote / Restate wf/s", "remote", "restate server", 1.5)
    ratio("10 steps, 16 callers: embedded / DBOS wf/s", "embedded", "dbos embedded", 10)
    ratio("10 steps, 16 callers: remote / DBOS wf/s", "remote", "dbos embedded", 10)
    for mode, bound in (("embedded", 3.0), ("remote", 10.0)):
        if one := row.get((f"troth {mode}", 10, 1)):
            checks.append((f"10 steps, 1 caller: {mode} p50 ms", one["p50 ms"], "<=", bound))
    for mode in ("embedded", "remote"):
        ten, hundred = row.get((f"troth {mode}", 10, 1)), row.get((f"troth {mode}", 100, 1))
        if ten and hundred:
            checks.append(
                (f"1 caller: {mode} 100-step / 10-step p50", hundred["p50 ms"] / ten["p50 ms"],
                 "<=", 10)
            )  # fmt: skip
        ten, hundred = row.get((f"troth {mode}", 10, 16)), row.get((f"troth {mode}", 100, 16))
        if ten and hundred:
            checks.append(
                (f"16 callers: {mode} 10-step / 100-step wf/s", ten["wf/s"] / hundred["wf/s"],
                 "<=", 10)
            )  # fmt: skip
    lines = [f"{'target':<48} {'figure':>8}   {'bound':<8} met"]
    for what, figure, comparison, bound in checks:
        met = figure >= bound if comparison == ">=" else figure <= bound
        verdict = "yes" if met else "NO"
        lines.append(f"{what:<48} {figure:>8.2f}   {comparison} {bound:<5g} {verdict}")
    return "\n".join(lines)


# -- the replay check's cost (issue 8) ---------------------------------------------------------

VARIANTS = ("checked", "unchecked")
WORKLOAD = "_replay_check_workload"  # ``python bench/sdk.py _replay_check_workload MODE ...``


class ReplayCheck:
    """Bench only: switch the SDK's replay check off and on again in a running process.

    Off, no argument digest is computed (so none is recorded), no record is compared with
    its call, and a context's end does not look for a recorded call past its last one. The
    ``troth:step`` tag (older than the check) and ``troth:run`` (durable retries: without
    it a step would cost a read) stay.
    """

    def __init__(self) -> None:
        from troth.sdk import context, execution

        self.context, self.execution = context, execution
        for owner, name in [
            (context, "digest"),
            (context.Context, "_finish"),
            (execution.Execution, "check"),
        ]:
            if not hasattr(owner, name):
                raise SystemExit(f"cannot switch the replay check off: no {owner.__name__}.{name}")
        self.shipped = (context.digest, context.Context._finish, execution.Execution.check)

    def set(self, on: bool) -> None:
        def no_digest(*values: Any) -> None:
            return None

        def no_finish(self: Any) -> None:
            return None

        def no_check(self: Any, record: Any, call: Any) -> None:
            return None

        digest, finish, check = self.shipped if on else (no_digest, no_finish, no_check)
        self.context.digest = digest  # context.py imports it by name, looks it up per call
        self.context.Context._finish = finish  # type: ignore[method-assign]
        self.execution.Execution.check = check  # type: ignore[method-assign]


async def replay_check_workload(args: argparse.Namespace) -> None:
    """One mode, both variants in this process, one app: each case's executions run in
    batches, checked and unchecked in turn (ABBA: the order flips every pair of batches),
    nothing in flight when the switch flips. One JSON object per case and variant."""
    sys.path.insert(0, str(HERE))
    import sdk_troth

    from troth import Troth

    switch = ReplayCheck()
    app = (
        Troth(db=args.db, group="bench")
        if args.mode == "embedded"
        else Troth(url=args.url, group="bench")
    )
    workflows = sdk_troth.build(app, sdk_troth.add_one)
    counts = {v: 0 for v in VARIANTS}  # local steps run per variant, to check the tags
    async with app:
        for variant in VARIANTS:  # warm-up: connections, pages, the thread pool, the stream
            switch.set(variant == "checked")
            await sdk_troth.measure(app, workflows[10], 10, 20, 4, f"warm-{variant}")
            counts[variant] += 20 * 10
        for steps in (1, 10):
            for callers in (1, 16):
                figures = {
                    v: {"seconds": 0.0, "cpu": 0.0, "latencies": [], "batches": []}
                    for v in VARIANTS
                }
                for pair in range(-(-args.n // args.batch)):
                    size = min(args.batch, args.n - pair * args.batch)
                    for variant in VARIANTS if pair % 2 == 0 else VARIANTS[::-1]:
                        switch.set(variant == "checked")
                        tag = f"s{steps}-c{callers}-b{pair}-{variant}"
                        cpu = time.process_time()
                        batch = await sdk_troth.measure(
                            app, workflows[steps], steps, size, callers, tag
                        )
                        cpu = time.process_time() - cpu
                        counts[variant] += size * steps
                        figure = figures[variant]
                        figure["cpu"] += cpu
                        figure["seconds"] += batch["seconds"]
                        figure["latencies"] += batch["latencies"]
                        figure["batches"].append(size / batch["seconds"])
                for variant, figure in figures.items():
                    case = {"mode": args.mode, "steps": steps, "callers": callers}
                    print(json.dumps({**case, "variant": variant, "n": args.n, **figure}))
        switch.set(True)
    print(json.dumps({"steps_run": counts}), flush=True)


def args_tagged(db: Path) -> tuple[int, int]:
    """Local steps recorded in ``db`` (a closed SQLite file): all, and those carrying an
    argument digest."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as connection:
        row = connection.execute(
            """SELECT count(*), count(json_extract(tags, '$."troth:args"')) FROM promises
               WHERE json_extract(tags, '$."troth:step"') LIKE 'run:%'"""
        ).fetchone()
    return int(row[0]), int(row[1])


def replay_check_mode(mode: str, directory: Path, n: int, batch: int) -> list[dict[str, Any]]:
    """One mode's workload process (remote: against a fresh server), its tags checked:
    exactly the steps run with the check on record their arguments' digest."""
    directory.mkdir()
    command = [sys.executable, str(Path(__file__).resolve()), WORKLOAD, mode]
    command += ["--n", str(n), "--batch", str(batch)]
    db = directory / ("embedded.db" if mode == "embedded" else "server.db")
    if mode == "embedded":
        cases = run_cases([*command, "--db", str(db)], directory)
    else:
        server = Server(directory)
        try:
            cases = run_cases([*command, "--url", server.url], directory)
        finally:
            server.close()
    counts = cases.pop()["steps_run"]
    steps, tagged = args_tagged(db)
    if (steps, tagged) != (sum(counts.values()), counts["checked"]):
        raise RuntimeError(f"{mode}: {tagged} of {steps} steps carry a digest, ran {counts}")
    print(f"{mode}: {tagged} of {steps} steps carry a digest, as run", file=sys.stderr)
    return cases


def replay_check_table(cases: list[dict[str, Any]]) -> str:
    lines = [
        f"{'mode':<9} {'steps':>5} {'callers':>7} {'checked wf/s':>12} {'unchecked':>9} "
        f"{'ratio':>6} {'batch ratio':>11} {'checked p50':>11} {'unchecked':>9} {'ratio':>6} "
        f"{'cpu µs/wf':>9} {'unchecked':>9} {'ratio':>6}"
    ]
    by_key = {(c["mode"], c["steps"], c["callers"], c["variant"]): c for c in cases}
    for mode, steps, callers in sorted({(c["mode"], c["steps"], c["callers"]) for c in cases}):
        on, off = (by_key[mode, steps, callers, v] for v in VARIANTS)
        rate_on, rate_off = on["n"] / on["seconds"], off["n"] / off["seconds"]
        p50_on = statistics.median(on["latencies"]) * 1000
        p50_off = statistics.median(off["latencies"]) * 1000
        cpu_on, cpu_off = (c["cpu"] / c["n"] * 1e6 for c in (on, off))
        pairs = [a / b for a, b in zip(on["batches"], off["batches"], strict=True)]
        lines.append(
            f"{mode:<9} {steps:>5} {callers:>7} {rate_on:>12.1f} {rate_off:>9.1f} "
            f"{rate_on / rate_off:>6.3f} {statistics.median(pairs):>11.3f} {p50_on:>11.2f} "
            f"{p50_off:>9.2f} {p50_on / p50_off:>6.3f} {cpu_on:>9.0f} {cpu_off:>9.0f} "
            f"{cpu_on / cpu_off:>6.3f}"
        )
    return "\n".join(lines)


def replay_check_micro() -> str:
    """What the check adds per ``ctx.run`` in isolation: one digest and one comparison."""
    import timeit

    from troth.protocol.records import PromiseRecord, PromiseState, Value
    from troth.sdk.replay import Call, digest

    number = 100_000
    call = Call("run", "add_one", digest((1,), {}))
    record = PromiseRecord("r", PromiseState.PENDING, Value(), Value(), call.tags(), 0, 0)
    digest_us = timeit.timeit(lambda: digest((1,), {}), number=number) / number * 1e6
    check_us = timeit.timeit(lambda: call.mismatch(record.tags), number=number) / number * 1e6
    return f"per ctx.run, in isolation: digest {digest_us:.2f} µs, comparison {check_us:.2f} µs"


def replay_check_cost(args: argparse.Namespace, n: int) -> None:
    cases: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="troth-bench-replay-") as tmp:
        for mode in ("embedded", "remote"):
            cases += replay_check_mode(mode, Path(tmp) / mode, n, args.batch)
    print(
        f"\nThe replay check's cost: {n} executions per case and variant, in batches of "
        f"{args.batch} alternating checked / unchecked, {os.cpu_count()} CPUs\n"
    )
    print(replay_check_table(cases))
    print(
        "\nratio = checked / unchecked (wf/s over all batches; p50 of all latencies); "
        "batch ratio = median over the pairs of adjacent batches; cpu µs/wf = the workload "
        "process's CPU (all threads; remote: the client only) per execution"
    )
    print(replay_check_micro())
    if args.json:
        Path(args.json).write_text(json.dumps(cases))


def metrics_cost(n: int) -> None:
    best: dict[tuple[str, int, int, str], float] = {}
    with tempfile.TemporaryDirectory(prefix="troth-bench-metrics-") as tmp:
        directory = Path(tmp)
        server = Server(directory)
        try:
            for turn, order in enumerate((("on", "off"), ("off", "on"))):
                for variant in order:
                    for mode in ("embedded", "remote"):
                        where = (
                            ["--db", str(directory / f"{variant}{turn}.db")]
                            if mode == "embedded"
                            else ["--url", server.url]
                        )
                        for case in metrics_variant(mode, where, variant == "on", n, directory):
                            key = (mode, case["steps"], case["callers"], variant)
                            best[key] = max(best.get(key, 0.0), case["n"] / case["seconds"])
        finally:
            server.close()
    print(f"\nThe SDK's metrics: {n} executions per case and variant, best of 2 turns, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}\n")  # fmt: skip
    print(f"{'mode':<9} {'steps':>5} {'callers':>7} {'with wf/s':>10} {'without':>8} {'ratio':>6}")
    for mode, steps, callers in sorted({key[:3] for key in best}):
        on, off = best[mode, steps, callers, "on"], best[mode, steps, callers, "off"]
        print(f"{mode:<9} {steps:>5} {callers:>7} {on:>10.1f} {off:>8.1f} {on / off:>6.3f}")
    print(metrics_micro())


def metrics_micro() -> str:
    """What the hooks of one 10-step execution cost in isolation: its run, ten step
    attempts."""
    import timeit

    from prometheus_client import CollectorRegistry

    from troth.sdk.metrics import PrometheusMetrics

    metrics = PrometheusMetrics(CollectorRegistry())
    execution = object()

    def one() -> None:
        metrics.run_started(execution, "ten_steps")
        for _ in range(10):
            with metrics.step("run:add_one"):
                pass
        metrics.run_finished(execution, None)

    number = 20_000
    us = timeit.timeit(one, number=number) / number * 1e6
    return f"the hooks of one 10-step execution, in isolation: {us:.1f} µs"


def metrics_variant(
    mode: str, where: list[str], metrics: bool, n: int, directory: Path
) -> list[dict[str, Any]]:
    """One workload process of ``sdk_troth.py``; with ``metrics``, checked to have counted
    every run it made."""
    command = [sys.executable, str(HERE / "sdk_troth.py"), mode, "--n", str(n), *where]
    cases = run_cases([*command, "--metrics"] if metrics else command, directory)
    if metrics:
        counted = cases.pop()["runs_counted"]
        ran = sum(case["n"] for case in cases) + 20  # and the warm-up's
        if counted < ran:
            raise RuntimeError(f"{mode}: the metrics counted {counted} of {ran} runs")
    return cases


def workload_main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog=f"sdk.py {WORKLOAD}")
    parser.add_argument("mode", choices=["embedded", "remote"])
    parser.add_argument("--db")
    parser.add_argument("--url")
    parser.add_argument("--n", type=int, required=True)
    parser.add_argument("--batch", type=int, required=True)
    asyncio.run(replay_check_workload(parser.parse_args(argv)))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == WORKLOAD:
        workload_main(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 executions per case")
    parser.add_argument("--n", type=int, help="executions per case (default 1000)")
    parser.add_argument("--dbos-python", help="a Python with dbos installed")
    parser.add_argument("--no-dbos", action="store_true", help="skip DBOS")
    parser.add_argument("--restate-server", help="a restate-server 1.7 binary")
    parser.add_argument("--restate-python", help="a Python with restate-sdk and hypercorn")
    parser.add_argument("--no-restate", action="store_true", help="skip Restate")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument(
        "--inline",
        action="store_true",
        help="also run the troth workloads with the step inline on the loop (own rows)",
    )
    parser.add_argument(
        "--replay-check-cost",
        action="store_true",
        help="troth only: the replay check as shipped against switched off, interleaved",
    )
    parser.add_argument(
        "--batch", type=int, default=100, help="with --replay-check-cost: executions per batch"
    )
    parser.add_argument(
        "--metrics-cost",
        action="store_true",
        help="troth only: the SDK with metrics (Troth(metrics=registry)) against without",
    )
    args = parser.parse_args()
    n = args.n or (100 if args.quick else 1000)
    if args.metrics_cost:
        metrics_cost(n)
        return
    if args.replay_check_cost:
        replay_check_cost(args, n)
        return
    installed: dict[str, str] = {}  # peers' Pythons and Restate's binary, set up first
    failed = []
    for peer, skip, setup in [
        ("dbos", args.no_dbos, lambda: peers.dbos_python(args.dbos_python)),
        ("restate", args.no_restate, lambda: peers.restate_python(args.restate_python)),
        ("restate-server", args.no_restate, lambda: peers.restate_server(args.restate_server)),
    ]:
        if skip:
            continue
        try:
            installed[peer] = setup()
        except (OSError, RuntimeError, subprocess.CalledProcessError) as e:
            failed.append(f"{peer}: {e}")
    if failed:
        raise SystemExit(
            "\nPEER SETUP FAILED, nothing measured:\n  " + "\n  ".join(failed)
            + "\nFix it, or skip the peer with --no-dbos / --no-restate."
        )  # fmt: skip
    cases: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="troth-bench-sdk-") as tmp, ExitStack() as running:
        directory = Path(tmp)
        troth = [sys.executable, str(HERE / "sdk_troth.py")]
        systems = [([*troth, "embedded", "--db", str(directory / "embedded.db")], directory)]
        server = Server(directory)
        running.callback(server.close)
        systems.append(([*troth, "remote", "--url", server.url], directory))
        if args.inline:  # the same stores, the step registered with inline=True
            systems += [([*command, "--inline"], cwd) for command, cwd in systems]
        if "dbos" in installed:
            scratch = directory / "dbos"
            scratch.mkdir()
            systems.append(([installed["dbos"], str(HERE / "sdk_dbos.py")], scratch))
        if "restate" in installed:
            scratch = directory / "restate"
            scratch.mkdir()
            restate = peers.Restate(installed["restate-server"], installed["restate"], scratch)
            running.callback(restate.close)
            command = [installed["restate"], str(HERE / "sdk_restate.py")]
            systems.append(([*command, "--ingress", restate.ingress], scratch))
        # Case by case, every system in turn (the order reversed every other case), so a
        # change in the machine's load falls on all of them, not on whichever ran then.
        for turn, (steps, callers) in enumerate(CASES):
            count = long_n(n) if steps == 100 else n
            for command, cwd in systems if turn % 2 == 0 else systems[::-1]:
                one = ["--n", str(count), "--callers", str(callers), "--steps", str(steps)]
                cases += run_cases([*command, *one], cwd)
    order = {(c["system"], c["mode"]): i for i, c in enumerate(cases[: len(systems)])}
    cases.sort(key=lambda c: (order[c["system"], c["mode"]], c["steps"], c["callers"]))
    rows = [summary(case) for case in cases]
    print(f"\nSDK benchmark, {n} executions per case (100 steps: {long_n(n)}), "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}\n")  # fmt: skip
    print(table(rows))
    for peer in PEERS:
        if peer in installed:
            print()
            print(ratios(rows, peer))
    print()
    print(targets(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


CASES = [(steps, callers) for steps in (1, 10, 100) for callers in (1, 16)]


def long_n(n: int) -> int:
    """Executions of the 100-step workflow: a twentieth as many (each is ten times the
    work), but at least three per caller at 16 callers."""
    return max(n // 20, 48)


if __name__ == "__main__":
    main()
