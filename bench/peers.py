"""Jobgate side by side with the Python task queues: Dramatiq and taskiq, in one run.

Run from the repository root: ``make bench`` (which installs the ``[bench]`` extra), or
``.venv/bin/python bench/peers.py`` (``--help``; ``--quick`` is a smoke run). Starts its own
``redis-server`` (bench/e2e.py's settings: AOF, ``appendfsync everysec``), and in each of
``--repeat`` runs, for each ``--processes`` count, starts each system in turn on that Redis
(flushed between systems; the order rotates from run to run), measures it, and stops it:

- drain: ``--tasks`` no-op tasks enqueued while nothing consumes them (Jobgate: a paused queue;
  the peers: their worker processes stopped), then consumed by N worker processes; tasks/s from
  release to the last one done. Jobgate with N gateway processes and an N-process SDK worker
  under uvicorn, once with one task per push and once with pushes of up to 32.
- CPU per task of each process (Redis, gateways, workers, this producer), enqueue and drain
  together, from ``/proc/<pid>/stat``.
- enqueue rates: Jobgate single enqueues (``AsyncClient.enqueue``) with ``--in-flight`` calls
  in flight, which the client coalesces into batch requests as by default (sdk.coalescing),
  and batches of 500; the peers' rate during their drain's enqueue.
- enqueue to start on the idle system, tasks arriving at ``--rate`` per second for
  ``--seconds``: p50 and p99.

Latency, enqueue and CPU are measured at the first process count. Markdown tables go to stdout
(progress to stderr): medians of the runs, and Jobgate ÷ best peer as the median of the ratios
taken within each run, which stay put when a shared machine's load moves absolute figures.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the `bench` folder importable as a package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import redis

from bench.peers_options import Options, parse
from bench.peers_report import (
    Metric,
    Results,
    metric_table,
    percentile,
    scaling_table,
    summary_table,
)
from bench.peers_session import Session, Stage
from gateway.redis_server import ManagedRedis

ENQUEUE = Metric("enqueue", "tasks/s")
P50 = Metric("enqueue to start, idle, p50", "ms", higher_is_better=False)
P99 = Metric("enqueue to start, idle, p99", "ms", higher_is_better=False)
ROLES = ("redis", "gateway", "worker", "producer", "total")


def drain_metric(processes: int) -> Metric:
    plural = "es" if processes > 1 else ""
    return Metric(f"drain, {processes} worker process{plural}", "tasks/s")


def cpu_metric(role: str) -> Metric:
    return Metric(f"CPU per task, {role}", "µs, enqueue + drain", higher_is_better=False)


def record(results: Results, found: Session, run: int, processes: int, full: bool) -> None:
    for label, drain in found.drains.items():
        results.record(drain_metric(processes), label, run, drain.drain_rate)
        if full:
            for role in ROLES:
                if role in drain.cpu_us:
                    results.record(cpu_metric(role), label, run, drain.cpu_us[role])
    for label, rate in found.enqueue.items():
        results.record(ENQUEUE, label, run, rate)
    for label, samples in found.latency_ms.items():
        results.record(P50, label, run, percentile(samples, 0.5))
        results.record(P99, label, run, percentile(samples, 0.99))


def session(name: str, stage: Stage, processes: int, full: bool) -> Session:
    if name == "jobgate":
        from bench import peers_jobgate

        return peers_jobgate.session(stage, processes, full)
    from bench import peers_python

    return peers_python.session(peers_python.PEERS[name], stage, processes, full)


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run(options: Options) -> Results:
    results = Results()
    with tempfile.TemporaryDirectory() as tmp, ManagedRedis(Path(tmp) / "redis") as server:
        redis_pid = server.process.pid if server.process else 0
        stage = Stage(server.url, redis_pid, options, Path(tmp))
        os.environ["BENCH_REDIS_URL"] = server.url  # read by the peers' modules, here too
        flusher = redis.Redis.from_url(server.url)
        for number in range(options.repeat):
            turn = number % len(options.systems)
            order = options.systems[turn:] + options.systems[:turn]
            progress(
                f"run {number + 1}/{options.repeat}: {', '.join(order)}; "
                f"load average {os.getloadavg()[0]:.1f}"
            )
            for index, processes in enumerate(options.processes):
                for name in order:
                    flusher.flushall()
                    started = time.monotonic()
                    found = session(name, stage, processes, index == 0)
                    record(results, found, number, processes, index == 0)
                    rates = ", ".join(
                        f"{label}: {d.drain_rate:,.0f}/s" for label, d in found.drains.items()
                    )
                    progress(
                        f"  {processes} process(es), {rates} ({time.monotonic() - started:.0f} s)"
                    )
        flusher.close()
    return results


def report(results: Results, options: Options, argv: list[str], load: tuple[float, float]) -> str:
    drains = {n: drain_metric(n) for n in options.processes}
    cpu = [cpu_metric(role) for role in ROLES]
    lines = [
        "Command: `" + shlex.join([".venv/bin/python", "bench/peers.py", *argv]) + "`",
        "",
        f"{options.repeat} run(s), {options.tasks:,} tasks per drain, processes "
        f"{','.join(map(str, options.processes))}; latency: {options.latency_samples} tasks at "
        f"{options.rate:g}/s. Load average (1 min) {load[0]:.1f} at the start, "
        f"{load[1]:.1f} at the end; {os.cpu_count()} CPUs.",
        "",
        "Jobgate ÷ best peer is the median of the ratios taken within each run; for rates the "
        "best peer is the fastest, for latency and CPU the lowest.",
        "",
        *_how(options),
        "",
        "### Summary",
        "",
        *summary_table(results, [*drains.values(), ENQUEUE, P50, P99, cpu[0], cpu[-1]]),
    ]
    if len(drains) > 1:
        lines += ["### Drain against processes (medians)", "", *scaling_table(results, drains)]
    lines += ["### Each metric", ""]
    for metric in [*drains.values(), ENQUEUE, P50, P99, *cpu]:
        if results.systems(metric):
            lines += metric_table(results, metric)
    return "\n".join(lines)


def _how(options: Options) -> list[str]:
    """How each system was run and fed, under the names the tables use."""
    from bench.peers_jobgate import BATCHED, ONE

    lines = [
        f"- {ONE} / {BATCHED}: N gateway processes, an N-process SDK worker under uvicorn; "
        "the drain's tasks go in with `Client.enqueue_batch`, 500 per request."
    ]
    peers = [name for name in options.systems if name != "jobgate"]
    if peers:
        from bench.peers_python import PEERS, versions

        for name in peers:
            peer = PEERS[name]
            how = peer.enqueue_how.format(in_flight=options.in_flight)
            command = shlex.join(["python", *peer.command("N")[1:]])
            lines.append(f"- {peer.label}: `{command}`; enqueued with {how}.")
        lines.append(f"- Versions: {versions()}.")
    return lines


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    options = parse(argv)
    missing = [
        name
        for name in options.systems
        if name != "jobgate" and importlib.util.find_spec(name) is None
    ]
    if missing:
        raise SystemExit(f"{', '.join(missing)} not installed: .venv/bin/pip install -e '.[bench]'")
    load_before = os.getloadavg()[0]
    results = run(options)
    print(report(results, options, argv, (load_before, os.getloadavg()[0])))


if __name__ == "__main__":
    main()
