"""End-to-end benchmark: producer → gateway → worker → result, everything on this machine.

Starts a managed Redis (AOF, appendfsync everysec), one or more gateway processes and an SDK
worker under uvicorn, then measures, each ``--repeat`` times (the median is reported):

- enqueue rate, one task per request: sequential (sync client) and 64 in flight (async client);
- enqueue rate in batches of 500, answered with receipts and with whole Tasks;
- end to end: ``--tasks`` no-op tasks enqueued in batches while dispatch runs, until every one
  has succeeded;
- latency from "enqueue sent" to "worker started the task" on an idle system, p50 and p99.

Run: ``.venv/bin/python bench/e2e.py`` (``--quick`` for a smoke run). Loopback only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx

from gateway.serving.redis_server import ManagedRedis, free_port
from sdk import AsyncClient, Client, TaskCreate, TaskState

if __package__ in (None, ""):  # run as a script: make the `bench` folder importable as a package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.proc_stat import cpu_seconds, tree_cpu_seconds

ROOT = Path(__file__).parents[1]
KEY = "bench-admin-key-0123456789"
NOOP = "bench.worker_app.noop"
BATCH_SIZE = 32
STAMP = "bench.worker_app.stamp"


def wait_http(url: str, proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{url}: process exited with {proc.returncode}")
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.05)
    raise SystemExit(f"{url} did not answer in {timeout}s")


@contextmanager
def system(
    gateways: int, worker_concurrency: int, gateway_env: Mapping[str, str] | None = None
) -> Iterator[tuple[list[str], Callable[[], dict[str, float]]]]:
    """Redis, gateways (with ``gateway_env`` added to their environment) and a worker; yields
    the gateway URLs and a CPU-seconds reader."""
    with tempfile.TemporaryDirectory() as tmp, ManagedRedis(Path(tmp)) as redis:
        redis_pid = redis.process.pid if redis.process else 0
        with jobgate(
            redis.url, redis_pid, gateways, worker_concurrency, gateway_env=gateway_env
        ) as started:
            yield started


@contextmanager
def gateways(
    redis_url: str,
    count: int,
    gateway_env: Mapping[str, str] | None = None,
    *,
    command: Sequence[str] = (sys.executable, "-m", "gateway", "serve"),
    cwd: Path = ROOT,
    own_env: Callable[[int], Mapping[str, str]] = lambda index: {},
) -> Iterator[list[tuple[str, subprocess.Popen[bytes]]]]:
    """``count`` gateway processes on a given Redis (``gateway_env`` added to their
    environment, and ``own_env(index)`` to each one's), each answering its health check; yields
    their URLs and processes. ``command`` and ``cwd`` run another tree's gateway, or a wrapper."""
    procs: list[tuple[str, subprocess.Popen[bytes]]] = []
    env = {
        **os.environ,
        "JOBGATE_REDIS_URL": redis_url,
        "JOBGATE_API_KEYS": json.dumps([{"key": KEY, "scopes": ["admin"]}]),
        "JOBGATE_ALLOW_PRIVATE_ENDPOINTS": "true",
        "JOBGATE_LOG_LEVEL": "warning",
        **(gateway_env or {}),
    }
    try:
        for index in range(count):
            port = free_port()
            proc = subprocess.Popen(
                list(command), env={**env, **own_env(index), "JOBGATE_PORT": str(port)}, cwd=cwd
            )
            procs.append((f"http://127.0.0.1:{port}", proc))
            wait_http(procs[-1][0] + "/healthz", proc)
        yield procs
    finally:
        stop([proc for _, proc in procs])


def stop(procs: Sequence[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        proc.terminate()
    for proc in procs:
        proc.wait(15)


@contextmanager
def jobgate(
    redis_url: str,
    redis_pid: int,
    gateways_count: int,
    worker_concurrency: int,
    worker_processes: int = 1,
    gateway_env: Mapping[str, str] | None = None,
    extra_queues: Sequence[str] = (),
) -> Iterator[tuple[list[str], Callable[[], dict[str, float]]]]:
    """Gateways and an SDK worker (``worker_processes`` uvicorn workers) on a given Redis.

    Registers two paused queues, ``bench`` (one task per push) and ``bench-batch`` (up to
    ``BATCH_SIZE``), and ``extra_queues`` like ``bench``, each with an endpoint on the worker.
    Yields the gateway URLs and a reader of CPU seconds per process (the worker's counts its
    uvicorn children too; ``redis_pid`` 0 leaves Redis out).
    """
    with gateways(redis_url, gateways_count, gateway_env) as started:
        urls = [url for url, _ in started]
        port = free_port()
        secrets = []
        with Client(urls[0], KEY) as client:
            queues = [("bench", 1), ("bench-batch", BATCH_SIZE), *((q, 1) for q in extra_queues)]
            for queue, batch_size in queues:
                client.put_queue(queue, max_concurrency=1000, paused=True)
                endpoint = client.add_endpoint(
                    queue,
                    f"http://127.0.0.1:{port}/",
                    concurrency=worker_concurrency,
                    batch_size=batch_size,
                )
                secrets.append(endpoint.secret)
        command = [
            sys.executable,
            "-m",
            "uvicorn",
            "bench.worker_app:app",
            "--port",
            str(port),
            "--log-level",
            "warning",
            "--no-access-log",
            "--loop",
            "uvloop",
            "--http",
            "httptools",
        ]
        if worker_processes > 1:
            command += ["--workers", str(worker_processes)]
        worker = subprocess.Popen(
            command,
            env={**os.environ, "JOBGATE_WORKER_SECRET": ",".join(secrets)},
            cwd=ROOT,
        )
        try:
            wait_http(f"http://127.0.0.1:{port}/", worker)
            cpu = cpu_reader(redis_pid, [proc for _, proc in started])

            def with_worker() -> dict[str, float]:
                return {**cpu(), "worker": tree_cpu_seconds(worker.pid)}

            yield urls, with_worker
        finally:
            stop([worker])


def cpu_reader(
    redis_pid: int, gateway_procs: Sequence[subprocess.Popen[bytes]]
) -> Callable[[], dict[str, float]]:
    """A reader of CPU seconds of Redis (left out when ``redis_pid`` is 0) and each gateway."""
    pids = {"redis": redis_pid} if redis_pid else {}
    pids.update({f"gateway{i}": p.pid for i, p in enumerate(gateway_procs)})

    def cpu() -> dict[str, float]:
        return {name: cpu_seconds(pid) for name, pid in pids.items()}

    return cpu


def fresh_queue(client: Client, name: str) -> str:
    """A paused queue with no endpoint: enqueues are measured without dispatch competing."""
    client.put_queue(name, paused=True)
    return name


def enqueue_sequential(url: str, count: int, queue: str) -> float:
    with Client(url, KEY) as client:
        start = time.perf_counter()
        for _ in range(count):
            client.enqueue(queue, NOOP)
        return count / (time.perf_counter() - start)


def enqueue_concurrent(
    urls: list[str], count: int, queue: str, in_flight: int = 64, linger: float | None = None
) -> float:
    """Single enqueues, ``in_flight`` at a time; one request each unless ``linger`` lets the
    clients coalesce them (sdk.coalescing: ``0.0`` is the SDK's default)."""

    async def run() -> float:
        clients = [AsyncClient(url, KEY, timeout=60, linger=linger) for url in urls]
        sem = asyncio.Semaphore(in_flight)

        async def one(i: int) -> None:
            async with sem:
                await clients[i % len(clients)].enqueue(queue, NOOP)

        start = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(count)))
        elapsed = time.perf_counter() - start
        for c in clients:
            await c.aclose()
        return count / elapsed

    return asyncio.run(run())


def enqueue_batches(
    urls: list[str],
    count: int,
    queue: str,
    size: int = 500,
    *,
    receipts: bool = True,
    task: TaskCreate | None = None,
) -> float:
    """Tasks per second through ``Client.enqueue_batch_receipts`` (what a producer that keeps
    the ids, not whole Tasks, calls: a TaskReceipt per task), or with ``receipts=False``
    ``Client.enqueue_batch`` (a whole Task per task, about ten times the answer's bytes).
    Each task is ``task`` (a no-op task by default)."""
    clients = [Client(url, KEY, timeout=60) for url in urls]
    batch = [task or TaskCreate(name=NOOP)] * size
    start = time.perf_counter()
    for i in range(0, count, size):
        client = clients[(i // size) % len(clients)]
        send = client.enqueue_batch_receipts if receipts else client.enqueue_batch
        send(queue, batch[: min(size, count - i)])
    elapsed = time.perf_counter() - start
    for c in clients:
        c.close()
    return count / elapsed


def end_to_end(urls: list[str], count: int, queue: str) -> float:
    """Tasks per second from the first enqueue until every task succeeded."""
    with Client(urls[0], KEY, timeout=60) as client:
        client.patch_queue(queue, paused=False)
        start = time.perf_counter()
        enqueue_batches(urls, count, queue)
        deadline = time.monotonic() + 300
        while client.get_queue(queue).counts[TaskState.SUCCEEDED] < count:
            if time.monotonic() > deadline:
                raise SystemExit("end-to-end run did not finish in 300 s")
            time.sleep(0.02)
        return count / (time.perf_counter() - start)


def latency(url: str, samples: int) -> tuple[float, float]:
    """p50 and p99 ms from just before the enqueue request to the worker starting the task."""
    found = []
    with Client(url, KEY, timeout=60) as client:
        client.patch_queue("bench", paused=False)
        for _ in range(samples):
            sent = time.time()
            task = client.enqueue("bench", STAMP)
            started = client.wait(task.id, timeout=30).result
            assert isinstance(started, float)
            found.append((started - sent) * 1000)
    found.sort()
    return statistics.median(found), found[min(len(found) - 1, round(0.99 * len(found)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--gateways", type=int, default=1)
    parser.add_argument("--latency-samples", type=int, default=300)
    parser.add_argument("--quick", action="store_true", help="small counts, one repeat")
    args = parser.parse_args()
    if args.quick:
        args.tasks, args.repeat, args.latency_samples = 1000, 1, 50
    results: dict[str, list[float]] = {}
    cpu_per_task: dict[str, list[float]] = {}
    cpu_batched: dict[str, list[float]] = {}

    def record(name: str, value: float) -> None:
        results.setdefault(name, []).append(value)
        print(f"  {name}: {value:,.1f}", flush=True)

    for run in range(args.repeat):
        print(f"run {run + 1}/{args.repeat}", flush=True)
        with (
            system(args.gateways, worker_concurrency=128) as (urls, cpu),
            Client(urls[0], KEY) as admin,
        ):
            one = fresh_queue(admin, "enqueue-one")
            record(
                "enqueue, 1 per request, sequential (tasks/s)",
                enqueue_sequential(urls[0], min(2000, args.tasks), one),
            )
            many = fresh_queue(admin, "enqueue-many")
            record(
                "enqueue, 1 per request, 64 in flight (tasks/s)",
                enqueue_concurrent(urls, min(5000, args.tasks), many),
            )
            in_batches = fresh_queue(admin, "enqueue-batch")
            record(
                "enqueue, batches of 500, receipts (tasks/s)",
                enqueue_batches(urls, args.tasks, in_batches),
            )
            whole = fresh_queue(admin, "enqueue-batch-tasks")
            record(
                "enqueue, batches of 500, whole Tasks (tasks/s)",
                enqueue_batches(urls, args.tasks, whole, receipts=False),
            )

            def end_to_end_with_cpu(label: str, queue: str, into: dict[str, list[float]]) -> None:
                before = cpu()
                record(
                    f"end to end, {args.tasks:,} no-op tasks, {label} (tasks/s)",
                    end_to_end(urls, args.tasks, queue),
                )
                after = cpu()
                for name in after:
                    into.setdefault(name, []).append(
                        (after[name] - before[name]) / args.tasks * 1e6
                    )

            end_to_end_with_cpu("one push each", "bench", cpu_per_task)
            end_to_end_with_cpu(f"pushes of up to {BATCH_SIZE}", "bench-batch", cpu_batched)
            p50, p99 = latency(urls[0], args.latency_samples)
            record("enqueue to worker start, idle, p50 (ms)", p50)
            record("enqueue to worker start, idle, p99 (ms)", p99)

    print()
    print(
        f"Median of {args.repeat} run(s); {args.gateways} gateway process(es); "
        f"{args.tasks:,} tasks end to end.\n"
    )
    print("| measurement | median | runs |")
    print("| --- | --: | --- |")
    for name, values in results.items():
        runs = ", ".join(f"{v:,.1f}" for v in values)
        print(f"| {name} | {statistics.median(values):,.1f} | {runs} |")
    print()
    print("CPU per task during the end-to-end runs (µs, median):")
    print()
    print(f"| process | one push each | pushes of up to {BATCH_SIZE} |")
    print("| --- | --: | --: |")
    for name, values in cpu_per_task.items():
        print(
            f"| {name} | {statistics.median(values):,.0f} "
            f"| {statistics.median(cpu_batched[name]):,.0f} |"
        )


if __name__ == "__main__":
    main()
