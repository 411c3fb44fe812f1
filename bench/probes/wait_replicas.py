"""What ``JOBGATE_WAIT_REPLICAS=1`` costs an enqueue: the same runs with it off and on.

For each setting: a fresh primary (AOF, appendfsync everysec) with one replica on loopback, one
gateway process (and the bench worker, idle: the queue is paused), then ``--single`` single
enqueues one after another (latency p50 and p99, client side), ``--concurrent`` single
enqueues 64 at a time (tasks per second) and ``--batched`` tasks in batches of 500. Prints a
Markdown table. Run: ``.venv/bin/python -m bench.probes.wait_replicas`` (``--quick`` for a
smoke run).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import redis

from bench.e2e import KEY, NOOP, enqueue_batches, enqueue_concurrent, jobgate
from gateway.serving.redis_server import ManagedRedis
from sdk import Client

SYNC_AT_ONCE = ("--repl-diskless-sync-delay", "0")


def single_latencies(url: str, count: int, queue: str) -> list[float]:
    found = []
    with Client(url, KEY) as client:
        for _ in range(count):
            start = time.perf_counter()
            client.enqueue(queue, NOOP)
            found.append((time.perf_counter() - start) * 1000)
    return sorted(found)


def wait_synced(port: int) -> None:
    with redis.Redis(port=port, decode_responses=True) as r:
        deadline = time.monotonic() + 30
        while r.info("replication").get("master_link_status") != "up":
            if time.monotonic() > deadline:
                raise SystemExit("the replica did not sync in 30 s")
            time.sleep(0.05)  # polling the replication link; the first sync takes a moment


def measure(replicas: int, single: int, concurrent: int, batched: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        primary = stack.enter_context(ManagedRedis(Path(tmp) / "primary", extra_args=SYNC_AT_ONCE))
        replica_args = [*SYNC_AT_ONCE, "--replicaof", "127.0.0.1", str(primary.port)]
        replica = stack.enter_context(ManagedRedis(Path(tmp) / "replica", extra_args=replica_args))
        wait_synced(replica.port)
        pid = primary.process.pid if primary.process else 0
        env = {"JOBGATE_WAIT_REPLICAS": str(replicas)}
        urls, _ = stack.enter_context(jobgate(primary.url, pid, 1, 8, gateway_env=env))
        latencies = single_latencies(urls[0], single, "bench")
        return {
            "p50": statistics.median(latencies),
            "p99": latencies[min(len(latencies) - 1, round(0.99 * len(latencies)))],
            "concurrent": enqueue_concurrent(urls, concurrent, "bench"),
            "batched": enqueue_batches(urls, batched, "bench"),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--single", type=int, default=500)
    parser.add_argument("--concurrent", type=int, default=3000)
    parser.add_argument("--batched", type=int, default=20000)
    parser.add_argument("--quick", action="store_true", help="a smoke run: few requests")
    args = parser.parse_args()
    if args.quick:
        args.single, args.concurrent, args.batched = 50, 200, 1000
    print("| wait_replicas | single enqueue p50 ms | p99 ms | 64 in flight, tasks/s | "
          "batches of 500, tasks/s |")  # fmt: skip
    print("| --- | --- | --- | --- | --- |")
    for replicas in (0, 1):
        r = measure(replicas, args.single, args.concurrent, args.batched)
        print(
            f"| {replicas} | {r['p50']:.2f} | {r['p99']:.2f} | {r['concurrent']:.0f} | "
            f"{r['batched']:.0f} |"
        )


if __name__ == "__main__":
    main()
