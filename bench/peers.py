"""Jobgate side by side with the Python task queues Dramatiq, taskiq and Celery, in one run.

Run from the repository root: ``make bench`` (which installs the ``[bench]`` extra), or
``.venv/bin/python bench/peers.py`` (``--help``; ``--quick`` is a smoke run). Starts its own
``redis-server`` (bench/e2e.py's settings: AOF, ``appendfsync everysec``) and, for the HTTP
race, the user's service (``bench/service_app.py``: one uvicorn process shared by all systems).
In each of ``--repeat`` runs, for each race, for each ``--processes`` count, it starts each
system in turn on that Redis (flushed between systems; the order rotates from run to run),
measures it, and stops it. Two races (``--races``):

- (a) Python functions: a no-op task. Jobgate: N gateway processes and an N-process SDK
  worker under uvicorn, once with one task per push and once with pushes of up to 32; the
  peers run the no-op natively in N worker processes.
- (b) HTTP service: each task is one POST to the user's service. Jobgate: N gateway processes
  push each task to the service (one per request; the service verifies the signature); each
  peer's task POSTs the same body to the same service with a shared keep-alive client.

In each: the drain (``--tasks`` tasks enqueued while nothing consumes them: Jobgate's queue is
paused, the peers' worker processes stopped; tasks/s from release to the last one done) and
the CPU per task of each process (Redis, gateways, workers, the service, this producer),
enqueue and drain together, from ``/proc/<pid>/stat``. At the first process count of race (a)
also: enqueue rates (Jobgate's single enqueues with ``--in-flight`` in flight as the SDK sends
them by default, coalesced, and one task per request for the CPU
it costs, and batches of 500 answered with receipts, beside whole Tasks; the peers' rate
during their drain's enqueue), Redis memory per
queued task, and enqueue to start on the idle system (tasks arriving at ``--rate`` per second
for ``--seconds``: p50 and p99). Once per run: the import time of each producer's library.

Markdown goes to stdout (progress to stderr): issue 20's targets met or not, then medians of
the runs, and Jobgate ÷ best peer as the median of the ratios taken within each run, which stay
put when a shared machine's load moves absolute figures.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the `bench` folder importable as a package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import redis

from bench.e2e import ROOT, stop, wait_http
from bench.peers_metrics import (
    ANSWER_P50,
    ANSWER_P99,
    ENQUEUE,
    IMPORT,
    IMPORT_SDK,
    P50,
    P99,
    QUEUED,
    RACE_TITLES,
    ROLES,
    cpu_metric,
    drain_metric,
    enqueue_cpu_metric,
)
from bench.peers_options import Options, parse
from bench.peers_report import (
    Results,
    metric_table,
    percentile,
    scaling_table,
    summary_table,
)
from bench.peers_session import Service, Session, Stage
from bench.peers_targets import backlog_note, target_table, targets
from gateway.serving.redis_server import ManagedRedis, free_port

# What a producer imports to send, per system (the label its figures go under).
# Jobgate's names load on first use (docs/architecture.md), so `import sdk` alone is the target's
# figure and what a producer imports to send is measured beside it.
IMPORTS = {
    "jobgate": (IMPORT_SDK, "import sdk"),
    "jobgate-producer": ("Jobgate, from sdk import Client, task", "from sdk import Client, task"),
    "dramatiq": ("Dramatiq", "import dramatiq; from dramatiq.brokers.redis import RedisBroker"),
    "taskiq": ("taskiq (stream)", "from taskiq_redis import RedisStreamBroker"),
    "celery": ("Celery", "from celery import Celery"),
}


def record(
    results: Results, found: Session, run: int, race: str, processes: int, full: bool
) -> None:
    for label, drain in found.drains.items():
        results.record(drain_metric(race, processes), label, run, drain.drain_rate)
        for role in ROLES:
            if role in drain.cpu_us:
                results.record(cpu_metric(race, role, processes), label, run, drain.cpu_us[role])
        if full and drain.queued_bytes is not None:
            results.record(QUEUED, label, run, drain.queued_bytes)
    for label, rate in found.enqueue.items():
        results.record(ENQUEUE, label, run, rate)
    for label, cpu in found.enqueue_cpu_us.items():
        for role, value in cpu.items():
            results.record(enqueue_cpu_metric(role), label, run, value)
    for label, samples in found.latency_ms.items():
        results.record(P50, label, run, percentile(samples, 0.5))
        results.record(P99, label, run, percentile(samples, 0.99))
    for label, samples in found.answer_ms.items():
        results.record(ANSWER_P50, label, run, percentile(samples, 0.5))
        results.record(ANSWER_P99, label, run, percentile(samples, 0.99))


def session(name: str, stage: Stage, processes: int, race: str, full: bool) -> Session:
    if name == "jobgate":
        from bench import peers_jobgate

        return peers_jobgate.session(stage, processes, race, full)
    from bench import peers_python

    return peers_python.session(peers_python.PEERS[name], stage, processes, race, full)


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def import_seconds(statement: str) -> float:
    """Seconds ``statement`` takes in a fresh interpreter (its start-up not counted)."""
    code = f"import time; t = time.perf_counter(); {statement}; print(time.perf_counter() - t)"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return float(done.stdout.split()[-1])


@contextmanager
def service(logs: Path) -> Iterator[Service]:
    """The user's HTTP service: ``bench/service_app.py`` in one uvicorn process."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "uvicorn", "bench.service_app:app", "--port", str(port)]
    command += ["--http", "httptools", "--loop", "uvloop", "--no-access-log"]
    with (logs / "service.log").open("ab") as out:
        proc = subprocess.Popen(
            [*command, "--log-level", "warning"], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        wait_http(url + "/", proc)
        yield Service(url, proc.pid)
    finally:
        stop([proc])


def run(options: Options) -> Results:
    results = Results()
    with (
        tempfile.TemporaryDirectory() as tmp,
        ManagedRedis(Path(tmp) / "redis") as server,
        service(Path(tmp)) as user_service,
    ):
        redis_pid = server.process.pid if server.process else 0
        stage = Stage(server.url, redis_pid, options, Path(tmp))
        os.environ["BENCH_REDIS_URL"] = server.url  # read by the peers' modules, here too
        os.environ["BENCH_SERVICE_URL"] = user_service.url
        flusher = redis.Redis.from_url(server.url)
        for number in range(options.repeat):
            turn = number % len(options.systems)
            order = options.systems[turn:] + options.systems[:turn]
            progress(
                f"run {number + 1}/{options.repeat}: {', '.join(order)}; "
                f"load average {os.getloadavg()[0]:.1f}"
            )
            for name in order:
                for key in (name, f"{name}-producer"):
                    if key in IMPORTS:
                        label, statement = IMPORTS[key]
                        results.record(IMPORT, label, number, import_seconds(statement))
            for race in options.races:
                staged = dataclasses.replace(
                    stage, service=user_service if race == "http" else None
                )
                for index, processes in enumerate(options.processes):
                    full = race == "python" and index == 0
                    for name in order:
                        flusher.flushall()
                        started = time.monotonic()
                        found = session(name, staged, processes, race, full)
                        record(results, found, number, race, processes, full)
                        rates = ", ".join(
                            f"{label}: {d.drain_rate:,.0f}/s" for label, d in found.drains.items()
                        )
                        progress(
                            f"  {race}, {processes} process(es), {rates} "
                            f"({time.monotonic() - started:.0f} s)"
                        )
        flusher.close()
    return results


def report(results: Results, options: Options, argv: list[str], load: tuple[float, float]) -> str:
    lines = [
        "Command: `" + shlex.join([".venv/bin/python", "bench/peers.py", *argv]) + "`",
        "",
        f"{options.repeat} run(s), {options.tasks:,} tasks per drain, processes "
        f"{','.join(map(str, options.processes))}, races {', '.join(options.races)}; latency: "
        f"{options.latency_samples} tasks at {options.rate:g}/s. Load average (1 min) "
        f"{load[0]:.1f} at the start, {load[1]:.1f} at the end; {os.cpu_count()} CPUs.",
        "",
        "Jobgate ÷ best peer is the median of the ratios taken within each run; for rates the "
        "best peer is the fastest, for latency, CPU, memory and import time the lowest.",
        "",
        *_how(options),
        "",
        "#### Issues 20's and 32's targets",
        "",
        *target_table(results, targets(options.processes, options.in_flight)),
        *backlog_note(results, options.in_flight, options.rate),
    ]
    for race in options.races:
        drains = {n: drain_metric(race, n) for n in options.processes}
        summary = [
            metric
            for n in options.processes
            for metric in (
                drains[n],
                cpu_metric(race, "total", n),
                cpu_metric(race, "redis", n),
            )
        ]
        lines += [f"#### {RACE_TITLES[race]}", "", *summary_table(results, summary)]
        if len(drains) > 1:
            lines += [
                f"##### {RACE_TITLES[race]}: drain against processes (medians)",
                "",
                *scaling_table(results, drains),
            ]
    others = [
        *(ENQUEUE, enqueue_cpu_metric("gateway"), P50, P99),
        *(ANSWER_P50, ANSWER_P99, QUEUED, IMPORT),
    ]
    lines += ["#### Enqueue, latency, memory, import", "", *summary_table(results, others)]
    lines += ["#### Each metric", ""]
    for metric in results.metrics():
        lines += metric_table(results, metric)
    return "\n".join(lines)


def _how(options: Options) -> list[str]:
    """How each system was run and fed, under the names the tables use."""
    from bench.peers_metrics import BATCHED, BATCHES_500_TASKS, ONE

    lines = [
        f"- {ONE} / {BATCHED}: (a) N gateway processes, an N-process SDK worker under "
        "uvicorn; (b) N gateway processes pushing one task per request to the service, which "
        "verifies each push's signature. The drain's tasks go in with "
        "`Client.enqueue_batch_receipts`, 500 per request (a TaskReceipt per task); "
        f"'{BATCHES_500_TASKS}' times `Client.enqueue_batch` (a whole Task per task).",
        "- The user's service (b): `uvicorn bench.service_app:app --http httptools --loop "
        "uvloop`, one process shared by all systems.",
    ]
    peers = [name for name in options.systems if name != "jobgate"]
    if peers:
        from bench.peers_python import PEERS, versions

        for name in peers:
            peer = PEERS[name]
            how = peer.enqueue_how.format(in_flight=options.in_flight)
            command = shlex.join(["python", *peer.command("N")[1:]])
            lines.append(
                f"- {peer.label}: `{command}`; enqueued with {how}; in (b) its task POSTs with "
                f"{peer.http_how}."
            )
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
