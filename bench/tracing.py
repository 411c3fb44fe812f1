"""Tracing overhead: end-to-end throughput with the gateway's span export off, then on.

Reuses the end-to-end system of ``bench/e2e.py`` (managed Redis, one gateway, one SDK worker
under uvicorn) and its drain measurement: ``--tasks`` no-op tasks enqueued in batches into a
running queue until all succeeded, with one task per push and with pushes of up to 32. "On"
exports spans over OTLP/HTTP to a collector stub in this process that counts the bytes and
decodes nothing (``OTEL_EXPORTER_OTLP_ENDPOINT``): "on" with the default sampler, so every task
is traced (the worst case), and "on, 10 % sampled" with ``parentbased_traceidratio`` at 0.1;
"off" sets no ``OTEL_*`` variable. The modes alternate within each run (off, on, off, on, ...)
so drift on a shared machine hits both alike; the ratio on/off of the medians is reported,
with the gateway's CPU per task. The worker does not trace in either mode (its SDK spans are
the application's to turn on).

Run: ``.venv/bin/python -m bench.tracing`` (``--quick`` for a smoke run). Loopback only.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))  # `python bench/tracing.py` works too

from bench.e2e import BATCH_SIZE, system
from bench.e2e import end_to_end as drain
from tests.otlp_stub import otlp_stub

SAMPLED_10 = {
    "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
    "OTEL_TRACES_SAMPLER_ARG": "0.1",
}
MODES = {"off": {}, "on": {}, "on, 10 % sampled": SAMPLED_10}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="1,000 tasks, one repeat")
    args = parser.parse_args()
    if args.quick:
        args.tasks, args.repeat = 1000, 1
    rate: dict[tuple[str, str], list[float]] = {}
    cpu_us: dict[tuple[str, str], list[float]] = {}
    with otlp_stub(decode=False) as collector:
        for run in range(args.repeat):
            for mode, sampler in MODES.items():
                env = {}
                if mode != "off":
                    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": collector.url, **sampler}
                print(f"run {run + 1}/{args.repeat}, tracing {mode}", flush=True)
                with system(1, worker_concurrency=128, gateway_env=env) as (urls, cpu):
                    for label, queue in (("one push each", "bench"), ("batch", "bench-batch")):
                        before = cpu()["gateway0"]
                        value = drain(urls, args.tasks, queue)
                        used = (cpu()["gateway0"] - before) / args.tasks * 1e6
                        rate.setdefault((label, mode), []).append(value)
                        cpu_us.setdefault((label, mode), []).append(used)
                        print(f"  {label}: {value:,.1f} tasks/s, gateway {used:,.0f} µs/task")
        exported = collector.received_bytes
    print()
    print(
        f"Median of {args.repeat} run(s), {args.tasks:,} tasks each; "
        f"{exported / 1e6:,.1f} MB of spans exported."
    )
    print()
    print("| pushes | tracing | tasks/s | ratio to off | gateway CPU (µs/task) |")
    print("| --- | --- | --: | --: | --: |")
    for label, name in (("one push each", "one task each"), ("batch", f"up to {BATCH_SIZE}")):
        off = statistics.median(rate[(label, "off")])
        for mode in MODES:
            value = statistics.median(rate[(label, mode)])
            used = statistics.median(cpu_us[(label, mode)])
            print(f"| {name} | {mode} | {value:,.0f} | {value / off:.2f} | {used:,.0f} |")


if __name__ == "__main__":
    main()
