"""Where a drain's cores go: CPU share of every process while a queue drains, per gateway.

Starts a managed Redis, GATEWAYS gateway processes (``python -m gateway serve``) and a
WORKERS-process SDK worker (``bench.worker_app`` under uvicorn, as ``bench.e2e.jobgate``), with
one paused queue per ``--variant CONCURRENCY:BATCH`` (an endpoint of that concurrency and batch
size on the worker). Then, ``--runs`` times, for each variant in turn: ``--tasks`` no-op tasks
go into its paused queue, it is resumed, and until every task has succeeded ``/proc`` is read.
Prints per variant and run the drain rate, each process's share of one core during the drain
(Redis, each gateway, each uvicorn worker process) and the share of the drain its main thread
was runnable but waited for a core (``/proc/<pid>/schedstat``: on a busy machine, what is
neither is time the process slept, waiting for another), the machine's idle share (``/proc/stat``),
the tasks each gateway claimed and the pushes it sent (its ``tasks_selected`` and
``push_duration`` metrics), Redis's script calls per task, and CPU per task in all; and the
tasks of the run that took more than one attempt, by how their first attempt ended (none in a
fault-free drain: bench/HISTORY.md, "Tasks pushed twice in a fault-free drain").

``--py-spy DIR`` also records each gateway and worker process with ``py-spy record --pid``
during each drain (with ``--idle``, where a loop waits shows too), as speedscope JSON in DIR.
py-spy comes with the ``[bench]`` extra (or set ``PY_SPY``).

Run: ``.venv/bin/python -m bench.drain_profile --gateways 2 --variant 128:32 --variant 128:1``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import redis
from prometheus_client.parser import text_string_to_metric_families

from bench.e2e import KEY, ROOT, enqueue_batches, wait_http
from bench.proc_stat import cpu_seconds, descendants
from gateway.serving.redis_server import ManagedRedis, free_port
from gateway.store.keys import QueueKeys
from gateway.store.records import load_record
from sdk import Client

POLL = 0.01


def metric_sum(url: str, family: str, suffix: str, queue: str) -> float:
    text = httpx.get(f"{url}/metrics", headers={"authorization": f"Bearer {KEY}"}).text
    return sum(
        s.value
        for f in text_string_to_metric_families(text)
        if f.name.startswith(family)
        for s in f.samples
        if s.name.endswith(suffix) and s.labels.get("queue") == queue
    )


def schedstat(pid: int) -> tuple[int, int]:
    """Nanoseconds the main thread of ``pid`` ran, and was runnable but waited for a core."""
    ran, waited, _ = Path(f"/proc/{pid}/schedstat").read_text().split()
    return int(ran), int(waited)


def _share(start: tuple[int, int], end: tuple[int, int], elapsed: float) -> str:
    return f"{(end[1] - start[1]) / 1e9 / elapsed:.0%}"


def machine_jiffies() -> tuple[int, int]:
    """(idle, total) jiffies of all CPUs so far."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return fields[3] + fields[4], sum(fields[:8])


def repeated(client: redis.Redis, queue: str, ids: set[str]) -> dict[str, int]:
    """The tasks of ``queue`` not in ``ids`` (which they join) that took more than one attempt,
    counted by how their first attempt ended (outcome, failure kind, error's start)."""
    k = QueueKeys.of(queue)
    ends: dict[str, int] = {}
    for key, raw in client.hgetall(k.meta).items():
        task_id = key.decode() if isinstance(key, bytes) else key
        if task_id in ids:
            continue
        ids.add(task_id)
        if load_record(raw)["att"] > 1:
            first = json.loads(client.hget(k.attempts, f"{task_id}:1") or "{}")
            end = f"{first.get('outcome')} {first.get('kind') or ''} {first.get('error', '')[:50]}"
            ends[end] = ends.get(end, 0) + 1
    return ends


def script_calls(client: redis.Redis) -> int:
    stats = client.info("commandstats")
    return sum(
        int(v["calls"]) for k, v in stats.items() if k in ("cmdstat_evalsha", "cmdstat_eval")
    )


@contextmanager
def system(
    redis_url: str, gateways: int, workers: int, variants: list[tuple[int, int]]
) -> Iterator[tuple[list[str], list[int], int, int]]:
    """Gateways, queues ``v0``, ``v1``, ... (paused, one endpoint each by ``variants``) and the
    worker; yields the gateway URLs, their pids, the worker's root pid and its port."""
    procs: list[subprocess.Popen[bytes]] = []
    env = {
        **os.environ,
        "JOBGATE_REDIS_URL": redis_url,
        "JOBGATE_API_KEYS": json.dumps([{"key": KEY, "scopes": ["admin"]}]),
        "JOBGATE_ALLOW_PRIVATE_ENDPOINTS": "true",
        "JOBGATE_LOG_LEVEL": "warning",
    }
    try:
        urls = []
        for _ in range(gateways):
            port = free_port()
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "gateway", "serve"],
                    env={**env, "JOBGATE_PORT": str(port)},
                    cwd=ROOT,
                )
            )
            urls.append(f"http://127.0.0.1:{port}")
            wait_http(urls[-1] + "/healthz", procs[-1])
        port = free_port()
        secrets = []
        with Client(urls[0], KEY) as client:
            for i, (concurrency, batch) in enumerate(variants):
                client.put_queue(f"v{i}", max_concurrency=10_000, paused=True)
                secrets.append(
                    client.add_endpoint(
                        f"v{i}",
                        f"http://127.0.0.1:{port}/",
                        concurrency=concurrency,
                        batch_size=batch,
                    ).secret
                )
        command = [sys.executable, "-m", "uvicorn", "bench.worker_app:app", "--port", str(port)]
        command += ["--log-level", "warning", "--no-access-log", "--loop", "uvloop"]
        command += ["--http", "httptools"]
        if workers > 1:
            command += ["--workers", str(workers)]
        procs.append(
            subprocess.Popen(
                command, env={**os.environ, "JOBGATE_WORKER_SECRET": ",".join(secrets)}, cwd=ROOT
            )
        )
        wait_http(f"http://127.0.0.1:{port}/", procs[-1])
        yield urls, [p.pid for p in procs[:gateways]], procs[-1].pid, port
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(15)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gateways", type=int, default=2)
    parser.add_argument("--workers", type=int, default=None, help="default: --gateways")
    parser.add_argument(
        "--variant",
        action="append",
        default=None,
        help="CONCURRENCY:BATCH of one queue's endpoint (repeatable; default 128:32)",
    )
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--py-spy", type=Path, default=None, help="folder for py-spy profiles")
    parser.add_argument("--idle", action="store_true", help="py-spy samples idle time too")
    args = parser.parse_args()
    workers = args.workers or args.gateways
    variants = [tuple(int(v) for v in s.split(":")) for s in (args.variant or ["128:32"])]
    rates: dict[int, list[float]] = {}
    cpus: dict[int, list[float]] = {}
    by_role: dict[tuple[int, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp, ManagedRedis(Path(tmp)) as managed:
        redis_pid = managed.process.pid if managed.process else 0
        with (
            system(managed.url, args.gateways, workers, variants) as (urls, gateways, worker, port),
            Client(urls[0], KEY, timeout=60) as admin,
            redis.Redis.from_url(managed.url) as store,
        ):
            procs = {"redis": redis_pid}
            procs.update({f"gateway{i}": pid for i, pid in enumerate(gateways)})
            children = descendants(worker) or [worker]
            procs.update({f"worker{i}": pid for i, pid in enumerate(children)})

            counted: set[str] = set()
            for i in range(len(variants)):  # warm-up: connections, scripts, caches
                done_key = QueueKeys.of(f"v{i}").succeeded
                enqueue_batches(urls, 500, f"v{i}")
                admin.patch_queue(f"v{i}", paused=False)
                while store.zcard(done_key) < 500:
                    time.sleep(POLL)
                admin.patch_queue(f"v{i}", paused=True)
                repeated(store, f"v{i}", counted)  # counted from the runs on
            for run in range(args.runs):
                for i, (concurrency, batch) in enumerate(variants):
                    queue = f"v{i}"
                    done_key = QueueKeys.of(queue).succeeded
                    target = int(store.zcard(done_key)) + args.tasks
                    enqueue_batches(urls, args.tasks, queue)
                    spies = []
                    if args.py_spy:
                        tag = f"{queue}-run{run + 1}"
                        spies = _spies(args.py_spy, args.idle, procs, tag)
                    selected = [metric_sum(u, "tasks_selected", "_total", queue) for u in urls]
                    pushes = [metric_sum(u, "push_duration", "_count", queue) for u in urls]
                    calls = script_calls(store)
                    start_cpu = {name: cpu_seconds(pid) for name, pid in procs.items()}
                    start_sched = {name: schedstat(pid) for name, pid in procs.items()}
                    start_idle = machine_jiffies()
                    start = time.perf_counter()
                    admin.patch_queue(queue, paused=False)
                    while store.zcard(done_key) < target:
                        time.sleep(POLL)
                    elapsed = time.perf_counter() - start
                    end_idle = machine_jiffies()
                    end_cpu = {name: cpu_seconds(pid) for name, pid in procs.items()}
                    end_sched = {name: schedstat(pid) for name, pid in procs.items()}
                    admin.patch_queue(queue, paused=True)
                    twice = repeated(store, queue, counted)
                    for spy in spies:
                        spy.send_signal(signal.SIGINT)
                    for spy in spies:
                        spy.wait(60)
                    calls = script_calls(store) - calls - 1  # less the PATCH's
                    selected = [
                        metric_sum(u, "tasks_selected", "_total", queue) - b
                        for u, b in zip(urls, selected, strict=True)
                    ]
                    pushes = [
                        metric_sum(u, "push_duration", "_count", queue) - b
                        for u, b in zip(urls, pushes, strict=True)
                    ]
                    idle = (end_idle[0] - start_idle[0]) / max(1, end_idle[1] - start_idle[1])
                    used = {n: end_cpu[n] - start_cpu[n] for n in procs}
                    shares = ", ".join(
                        f"{n} {used[n] / elapsed:.0%}"
                        f" (waits for a core {_share(start_sched[n], end_sched[n], elapsed)})"
                        for n in procs
                    )
                    rate = args.tasks / elapsed
                    cpu_us = sum(used.values()) / args.tasks * 1e6
                    roles = {
                        role: sum(v for n, v in used.items() if n.startswith(role))
                        / args.tasks
                        * 1e6
                        for role in ("redis", "gateway", "worker")
                    }
                    rates.setdefault(i, []).append(rate)
                    cpus.setdefault(i, []).append(cpu_us)
                    for role, us in roles.items():
                        by_role.setdefault((i, role), []).append(us)
                    print(
                        f"run {run + 1}, concurrency {concurrency}, batch {batch}: "
                        f"{rate:,.0f} tasks/s, {cpu_us:.0f} µs CPU per task ("
                        f"{', '.join(f'{r} {us:.0f}' for r, us in roles.items())}); core share: "
                        f"{shares}; in all {sum(used.values()) / elapsed:.2f} cores, machine idle "
                        f"{idle:.0%}; claimed per gateway {[int(s) for s in selected]}, pushes "
                        f"{[int(p) for p in pushes]}; script calls per task "
                        f"{calls / args.tasks:.3f}; pushes' connections per worker process "
                        f"{_connections(port, children)}; tasks with 2+ attempts "
                        f"{sum(twice.values())} {twice or ''}",
                        flush=True,
                    )
    print(f"{args.gateways} gateway(s), {workers} worker process(es); medians:")
    for i, (concurrency, batch) in enumerate(variants):
        print(
            f"  concurrency {concurrency}, batch {batch}: "
            f"{statistics.median(rates[i]):,.0f} tasks/s "
            f"({', '.join(f'{r:,.0f}' for r in rates[i])}), "
            f"{statistics.median(cpus[i]):.0f} µs CPU per task ("
            + ", ".join(
                f"{role} {statistics.median(by_role[i, role]):.0f}"
                for role in ("redis", "gateway", "worker")
            )
            + ")"
        )


def _connections(port: int, pids: list[int]) -> list[int]:
    """How many connections to ``port`` each of ``pids`` holds (``ss``)."""
    out = subprocess.run(
        ["ss", "-tnpH", "state", "established", f"( sport = :{port} )"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    return [out.count(f"pid={pid},") for pid in pids]


def _spies(
    folder: Path, idle: bool, procs: dict[str, int], tag: str
) -> list[subprocess.Popen[bytes]]:
    spy = os.environ.get("PY_SPY") or shutil.which("py-spy") or "py-spy"
    folder.mkdir(parents=True, exist_ok=True)
    started = []
    for name, pid in procs.items():
        if name == "redis":
            continue
        out = folder / f"{name}-{tag}.json"
        command = [spy, "record", "--pid", str(pid), "--format", "speedscope"]
        command += ["--idle"] if idle else []
        command += ["--rate", "250", "--nonblocking", "-o", str(out)]
        started.append(
            subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        )
    time.sleep(1.0)  # py-spy attaches
    return started


if __name__ == "__main__":
    main()
