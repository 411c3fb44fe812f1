"""What recording metrics costs end to end: the drain benchmark of ``bench/e2e.py`` with the
gateway's metrics on (the default, scraped once a second, far more often than Prometheus would)
and off (``JOBGATE_METRICS=false``), in one run.

Systems with metrics on and off alternate (on, off, on, off, ...), each freshly started, so that
a noisy neighbour hits both about alike; the medians and their ratio are reported, with the
gateway's CPU per task. Drain throughput on a shared 2-core machine moves by tens of percent
between runs, so the run also measures, in this process, what the gateway's recorder costs per
task (the same calls the dispatcher makes: a claim, its pushes, their finish, into a provider
with the Prometheus reader), and sets it against the gateway's CPU per task with metrics off.
Run: ``.venv/bin/python -m bench.metrics_overhead`` (``--quick`` for a smoke run). Loopback only.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import timeit

import httpx

from bench.e2e import BATCH_SIZE, KEY, end_to_end, system
from gateway.store.records import Lease
from gateway.store.tasks import Fence, Finish, Finished
from gateway.telemetry.export import METER_NAME, metrics_export
from gateway.telemetry.labels import TaskLabels
from gateway.telemetry.metrics import GatewayMetrics
from sdk.wire import AttemptOutcome, TaskState


class Scraper:
    """Scrapes ``/metrics`` every ``interval`` seconds in a thread while it runs."""

    def __init__(self, url: str, interval: float = 1.0) -> None:
        self._url = url
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.scrapes = 0

    def _run(self) -> None:
        with httpx.Client(headers={"authorization": f"Bearer {KEY}"}, timeout=10) as http:
            while not self._stop.wait(self._interval):
                answer = http.get(f"{self._url}/metrics")
                answer.raise_for_status()
                self.scrapes += 1

    def __enter__(self) -> Scraper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def drain(metrics: bool, tasks: int) -> dict[str, float]:
    """One fresh system: tasks/s and gateway CPU µs per task, one push each and batched."""
    env = {} if metrics else {"JOBGATE_METRICS": "false"}
    found: dict[str, float] = {}
    with system(1, worker_concurrency=128, gateway_env=env) as (urls, cpu):
        for label, queue in (
            ("one push each", "bench"),
            (f"batches of {BATCH_SIZE}", "bench-batch"),
        ):
            before = cpu()["gateway0"]
            if metrics:
                with Scraper(urls[0]) as scraper:
                    found[f"{label}: tasks/s"] = end_to_end(urls, tasks, queue)
                assert scraper.scrapes > 0
            else:
                found[f"{label}: tasks/s"] = end_to_end(urls, tasks, queue)
            found[f"{label}: gateway CPU µs/task"] = (cpu()["gateway0"] - before) / tasks * 1e6
    return found


def recorder_cost(batch: int, pushes_per_batch: int) -> float:
    """µs of the recorder per task: ``batch`` tasks claimed together, pushed in
    ``pushes_per_batch`` pushes, finished in one call (best of 7 repeats)."""
    export = metrics_export({})
    metrics = GatewayMetrics(
        export.provider.get_meter(METER_NAME), TaskLabels(lambda q: None, lambda q: ())
    )
    lease = Lease("bench", "T", "ep", "tok", "noop", 1, None, "null", None, 9, 9, None, 0, 1)
    leases = [lease] * batch
    finishes = [Finish("T", "tok", AttemptOutcome.SUCCEEDED)] * batch
    done = [Finished(Fence.OK, TaskState.SUCCEEDED, None, "noop", "", 1, 0)] * batch

    def one_batch() -> None:
        metrics.selected(leases)
        for _ in range(pushes_per_batch):
            metrics.pushed("bench", "ep", "2xx", 3.0)
        metrics.finished("bench", finishes, done, 10)

    best = min(timeit.repeat(one_batch, number=200, repeat=7)) / 200
    export.provider.shutdown()
    return best / batch * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--pairs", type=int, default=3, help="(on, off) pairs of systems")
    parser.add_argument("--quick", action="store_true", help="1,000 tasks, one pair")
    args = parser.parse_args()
    if args.quick:
        args.tasks, args.pairs = 1000, 1
    runs: dict[bool, list[dict[str, float]]] = {True: [], False: []}
    for pair in range(args.pairs):
        for metrics in (True, False):
            print(f"pair {pair + 1}/{args.pairs}, metrics {'on' if metrics else 'off'}", flush=True)
            found = drain(metrics, args.tasks)
            for name, value in found.items():
                print(f"  {name}: {value:,.1f}", flush=True)
            runs[metrics].append(found)
    print()
    print(f"{args.pairs} pair(s) of fresh systems, {args.tasks:,} no-op tasks each drain.\n")
    print("| measurement | metrics on | metrics off | on / off |")
    print("| --- | --: | --: | --: |")
    for name in runs[True][0]:
        on = statistics.median(r[name] for r in runs[True])
        off = statistics.median(r[name] for r in runs[False])
        print(f"| {name} | {on:,.1f} | {off:,.1f} | {on / off:.3f} |")
    print()
    print("The recorder alone, in this process, against the gateway's CPU with metrics off:\n")
    print("| drain | recorder µs/task | gateway CPU µs/task, metrics off | share |")
    print("| --- | --: | --: | --: |")
    for label, batch, pushes in (
        ("one push each", 1, 1),  # the worst case: every claim and finish call holds one task
        ("one push each", 8, 8),
        (f"batches of {BATCH_SIZE}", BATCH_SIZE, 1),
    ):
        cost = recorder_cost(batch, pushes)
        off = statistics.median(r[f"{label}: gateway CPU µs/task"] for r in runs[False])
        print(f"| {label} (claims of {batch}) | {cost:,.1f} | {off:,.1f} | {cost / off:.1%} |")


if __name__ == "__main__":
    main()
