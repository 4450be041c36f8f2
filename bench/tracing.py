"""What tracing costs the SDK: ``python bench/tracing.py [--executions N] [--rounds R]``.

Three embedded apps in one process, each on a fresh SQLite file, run the same workflow (a
``ctx.run`` of a cheap ``def`` per step, ``--steps`` of them):

- **absent**: OpenTelemetry cannot be imported (as without the ``otel`` extra);
- **off**: it is installed but no tracer provider is configured (the default);
- **on**: ``Troth(tracer=...)`` with the OpenTelemetry SDK and an in-memory exporter.

Absent and off both get the no-op hooks (``troth.sdk.tracing.UNTRACED``), chosen once when
the app starts; the question is whether anything of tracing is paid per call when it is
off. The databases are on ``/dev/shm`` when there is one, so that the disk's flushes do not
drown the differences. The arms take turns in batches of ``--executions`` (in a rotating
order, so load from other jobs falls on all of them); each round compares its three
batches, and the median over ``--rounds`` of each ratio (off/absent, on/off) is reported,
with its interquartile range, beside each arm's median executions/s and CPU per execution.

It also times the no-op hooks alone, as many as one execution of the workflow calls them
(one run, one span per step attempt, one replay mark per step when the workflow resumes),
against the CPU of an execution: the part of an execution that tracing-off can cost.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from troth import Context, Troth
from troth.protocol.records import PromiseRecord, PromiseState, Value
from troth.sdk.tracing import UNTRACED, Tracing

ARMS = ("absent", "off", "on")


def cheap(i: int) -> int:
    return i + 1


def make_app(arm: str, folder: Path, steps: int, exporter: InMemorySpanExporter) -> Troth:
    tracer = None
    if arm == "on":
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        tracer = provider.get_tracer("bench")
    app = Troth(db=str(folder / f"{arm}.db"), group=arm, tracer=tracer)

    @app.register(name="flow")
    async def flow(ctx: Context, n: int) -> int:
        for i in range(steps):
            n = await ctx.run(cheap, n + i)
        return n

    return app


@contextlib.contextmanager
def without_opentelemetry() -> Iterator[None]:
    """Imports of OpenTelemetry fail inside, as they do without the extra."""
    saved = sys.modules.get("opentelemetry")
    sys.modules["opentelemetry"] = None  # type: ignore[assignment]
    try:
        yield
    finally:
        sys.modules["opentelemetry"] = saved  # type: ignore[assignment]


async def batch(app: Troth, arm: str, first: int, count: int) -> tuple[float, float]:
    """Run ``count`` executions one after another: (wall seconds, CPU seconds)."""
    wall, cpu = time.perf_counter(), time.process_time()
    for n in range(first, first + count):
        await app.run(f"{arm}-{n}", "flow", n).result()
    return time.perf_counter() - wall, time.process_time() - cpu


def quartiles(ratios: list[float]) -> str:
    q1, median, q3 = statistics.quantiles(ratios, n=4)
    return f"{median:.3f} [{q1:.3f}, {q3:.3f}]"


def hook_cost(steps: int, repeat: int = 20_000) -> float:
    """Seconds the no-op hooks take per execution of the workflow (median of 5 timings)."""
    tracing: Tracing = UNTRACED
    record = PromiseRecord(
        id="x", state=PromiseState.RESOLVED, param=Value(), value=Value(), tags={},
        timeout_at=0, created_at=0,
    )  # fmt: skip
    timings = []
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(repeat):
            with tracing.execution(record, "flow", 1, 1):
                for _ in range(steps):
                    with tracing.step("x.0", "run:cheap", 1):
                        pass
                    tracing.replayed(record)
        timings.append((time.perf_counter() - started) / repeat)
    return statistics.median(timings)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executions", type=int, default=20, help="per batch")
    parser.add_argument("--rounds", type=int, default=31)
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()

    exporter = InMemorySpanExporter()
    shm = "/dev/shm" if Path("/dev/shm").is_dir() else None
    with tempfile.TemporaryDirectory(prefix="troth-bench-tracing-", dir=shm) as tmp:
        apps = {arm: make_app(arm, Path(tmp), args.steps, exporter) for arm in ARMS}
        async with contextlib.AsyncExitStack() as stack:
            for arm, app in apps.items():
                if arm == "absent":
                    with without_opentelemetry():
                        await stack.enter_async_context(app)
                else:
                    await stack.enter_async_context(app)
            tracing = {arm: app.runtime.tracing for arm, app in apps.items()}
            assert tracing["absent"] is UNTRACED and tracing["off"] is UNTRACED
            assert tracing["on"] is not UNTRACED

            await batch(apps["absent"], "warm", 0, 10)  # imports, caches, the file's pages
            results: dict[str, list[tuple[float, float]]] = {arm: [] for arm in ARMS}
            for r in range(args.rounds):
                order = ARMS[r % 3 :] + ARMS[: r % 3]
                for arm in order:
                    first = r * args.executions
                    results[arm].append(await batch(apps[arm], arm, first, args.executions))
    spans = len(exporter.get_finished_spans())
    # Per execution: the rpc, its run, one span per step.
    assert spans == args.rounds * args.executions * (2 + args.steps), spans

    n = args.executions
    rate = {arm: statistics.median(n / wall for wall, _ in results[arm]) for arm in ARMS}
    cpu = {arm: statistics.median(c / n for _, c in results[arm]) for arm in ARMS}
    print(f"{args.rounds} rounds of {n} executions per arm, {args.steps} steps each")
    print(f"{'arm':8} {'executions/s':>13} {'CPU µs/execution':>17}")
    for arm in ARMS:
        print(f"{arm:8} {rate[arm]:13.1f} {cpu[arm] * 1e6:17.0f}")
    for a, b in (("off", "absent"), ("on", "off")):
        pairs = list(zip(results[a], results[b], strict=True))
        speed = quartiles([wb / wa for (wa, _), (wb, _) in pairs])
        work = quartiles([ca / cb for (_, ca), (_, cb) in pairs])
        print(f"{a} / {b}: throughput {speed}, CPU {work} (median [quartiles] of rounds)")
    hooks = hook_cost(args.steps)
    print(f"no-op hooks: {hooks * 1e6:.2f} µs per execution, "
          f"{hooks / cpu['absent'] * 100:.3f} % of its CPU")  # fmt: skip


if __name__ == "__main__":
    asyncio.run(main())
