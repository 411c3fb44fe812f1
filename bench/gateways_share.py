"""How N gateway processes share one queue's drain: tasks/s, claims per gateway (from each
gateway's ``tasks_selected`` metric), CPU per task per process.

Run: ``.venv/bin/python -m bench.gateways_share GATEWAYS WORKER_PROCESSES [QUEUE]`` (QUEUE
``bench``, one push per task, or ``bench-batch``, pushes of up to 32). Loopback only.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from bench.e2e import KEY, enqueue_batches, jobgate
from gateway.serving.redis_server import ManagedRedis
from sdk import Client, TaskState

TASKS = 20_000


def selected(url: str, queue: str) -> float:
    text = httpx.get(f"{url}/metrics", headers={"authorization": f"Bearer {KEY}"}).text
    return sum(
        s.value
        for f in text_string_to_metric_families(text)
        if f.name == "tasks_selected"
        for s in f.samples
        if s.name == "tasks_selected_total" and s.labels.get("queue") == queue
    )


def main() -> None:
    gateways, worker_processes = int(sys.argv[1]), int(sys.argv[2])
    queue = sys.argv[3] if len(sys.argv) > 3 else "bench"
    with tempfile.TemporaryDirectory() as tmp, ManagedRedis(Path(tmp)) as redis:
        pid = redis.process.pid if redis.process else 0
        with (
            jobgate(redis.url, pid, gateways, 128, worker_processes) as (urls, cpu),
            Client(urls[0], KEY, timeout=60) as client,
        ):
            enqueue_batches(urls, TASKS, queue)
            before = [selected(u, queue) for u in urls]
            cpu_before = cpu()
            start = time.perf_counter()
            client.patch_queue(queue, paused=False)
            while client.get_queue(queue).counts[TaskState.SUCCEEDED] < TASKS:
                time.sleep(0.02)  # polling the count; the drain takes seconds
            elapsed = time.perf_counter() - start
            cpu_after = cpu()
            shares = [int(selected(u, queue) - b) for u, b in zip(urls, before, strict=True)]
    per_task = ", ".join(
        f"{name} {(cpu_after[name] - cpu_before[name]) / TASKS * 1e6:.0f} µs" for name in cpu_after
    )
    print(
        f"{gateways} gateway(s), {worker_processes} worker process(es), {queue}: "
        f"{TASKS / elapsed:,.0f} tasks/s; claims per gateway {shares}; CPU per task: {per_task}"
    )


if __name__ == "__main__":
    main()
