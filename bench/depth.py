"""Cost against queue depth: Redis memory per queued task, and the Redis and gateway CPU per
task of a drain from a shallow queue against a deep one.

For each depth D (default 1,000 and 1,000,000): a fresh system (managed Redis, one gateway, the
bench worker), D + ``--drain`` no-op tasks enqueued in batches of 500 into the paused one-push
queue, ``used_memory`` read before and after (memory per queued task); then the queue is
resumed until ``--drain`` tasks have succeeded, with Redis's and the gateway's CPU from
``/proc`` and the claim and finish scripts' mean time from ``INFO commandstats`` (EVALSHA),
so the queue stays about D deep while measured. Prints a Markdown table with the deep ÷ shallow
ratios. Run: ``.venv/bin/python -m bench.depth`` (``--depths 1000,100000`` for a shorter run).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import redis

from bench.e2e import KEY, NOOP, enqueue_batches, jobgate
from gateway.serving.redis_server import ManagedRedis
from sdk import Client, TaskCreate, TaskState


def evalsha_usec(r: redis.Redis) -> tuple[int, int]:
    """(calls, µs) of EVALSHA so far."""
    stats = r.info("commandstats").get("cmdstat_evalsha", {})
    return int(stats.get("calls", 0)), int(stats.get("usec", 0))


def measure(depth: int, drain: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp, ManagedRedis(Path(tmp)) as server:
        pid = server.process.pid if server.process else 0
        r = redis.Redis.from_url(server.url)
        with jobgate(server.url, pid, 1, 128) as (urls, cpu), Client(urls[0], KEY) as client:
            before = int(r.info("memory")["used_memory"])
            enqueue_batches(urls, depth + drain, "bench")
            after = int(r.info("memory")["used_memory"])
            payload = len(TaskCreate(name=NOOP).model_dump_json(exclude_none=True))
            cpu_before, (calls0, usec0) = cpu(), evalsha_usec(r)
            start = time.perf_counter()
            client.patch_queue("bench", paused=False)
            while client.get_queue("bench").counts[TaskState.SUCCEEDED] < drain:
                time.sleep(0.02)  # polling the count; the drain takes seconds
            elapsed = time.perf_counter() - start
            client.patch_queue("bench", paused=True)
            cpu_after, (calls1, usec1) = cpu(), evalsha_usec(r)
            r.close()
    return {
        "memory per queued task (bytes)": (after - before) / (depth + drain),
        "request body of each task (bytes)": payload,
        "drain (tasks/s)": drain / elapsed,
        "Redis CPU per task (µs)": (cpu_after["redis"] - cpu_before["redis"]) / drain * 1e6,
        "gateway CPU per task (µs)": (cpu_after["gateway0"] - cpu_before["gateway0"]) / drain * 1e6,
        "EVALSHA mean (µs per call)": (usec1 - usec0) / max(1, calls1 - calls0),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depths", default="1000,1000000")
    parser.add_argument("--drain", type=int, default=5_000)
    args = parser.parse_args()
    depths = [int(d) for d in args.depths.split(",")]
    found = {}
    for depth in depths:
        found[depth] = measure(depth, args.drain)
        print(f"depth {depth:,}: {found[depth]}", flush=True)
    shallow, deep = depths[0], depths[-1]
    print(f"\n| measurement | {shallow:,} queued | {deep:,} queued | ratio |")
    print("| --- | --: | --: | --: |")
    for name in found[shallow]:
        a, b = found[shallow][name], found[deep][name]
        print(f"| {name} | {a:,.1f} | {b:,.1f} | {b / a if a else 0:.2f} |")


if __name__ == "__main__":
    main()
