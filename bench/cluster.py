"""Three queues on one Redis against the same three queues on a three-primary Redis Cluster,
one on each shard (issue 12).

Each system: the store (a managed Redis, or a cluster of three primaries without replicas), one
gateway process and a 2-process SDK worker (``bench.e2e.jobgate``); three one-push queues whose
hash tags land on three different primaries of the cluster; ``--tasks`` no-op tasks enqueued
into each while paused, then all three resumed and drained. Reports tasks/s over the three,
the gateway's CPU per task and each Redis process's CPU per task. Single and cluster systems
alternate, ``--runs`` times. Run: ``.venv/bin/python -m bench.cluster``. Loopback only.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import redis

from bench.e2e import KEY, enqueue_batches, jobgate
from bench.proc_stat import cpu_seconds
from gateway.serving.redis_cluster import ManagedCluster
from gateway.serving.redis_server import ManagedRedis
from sdk import Client, TaskState


def queues_on_three_shards(port: int) -> list[str]:
    """Three queue names whose keys (``jg:{name}:…``) live on three different primaries."""
    with redis.Redis(host="127.0.0.1", port=port, decode_responses=True) as node:
        owners = [(int(r[0]), int(r[1]), r[2][1]) for r in node.execute_command("CLUSTER SLOTS")]
        found: dict[int, str] = {}
        for i in range(1000):
            name = f"bench-{i}"
            slot = int(node.execute_command("CLUSTER KEYSLOT", f"jg:{{{name}}}:queue"))
            owner = next(p for lo, hi, p in owners if lo <= slot <= hi)
            found.setdefault(owner, name)
            if len(found) == 3:
                return list(found.values())
    raise RuntimeError("no three queue names on three primaries")


@contextmanager
def store(kind: str, root: Path) -> Iterator[tuple[str, list[int], list[str]]]:
    """(gateway Redis URL, Redis pids, three queue names) for ``single`` or ``cluster``."""
    if kind == "single":
        with ManagedRedis(root) as server:
            assert server.process is not None
            yield server.url, [server.process.pid], ["bench-a", "bench-b", "bench-c"]
    else:
        with ManagedCluster(root, primaries=3, replicas=0) as cluster:
            pids = [s.process.pid for s in cluster.servers if s.process is not None]
            yield cluster.url, pids, queues_on_three_shards(cluster.ports[0])


def measure(kind: str, tasks: int) -> dict[str, float]:
    with (
        tempfile.TemporaryDirectory() as tmp,
        store(kind, Path(tmp)) as (url, pids, queues),
        jobgate(url, 0, 1, 128, 2, extra_queues=queues) as (urls, cpu),
        Client(urls[0], KEY, timeout=60) as client,
    ):
        for queue in queues:
            enqueue_batches(urls, tasks, queue)
        redis_before = [cpu_seconds(pid) for pid in pids]
        before = cpu()
        start = time.perf_counter()
        for queue in queues:
            client.patch_queue(queue, paused=False)
        while sum(client.get_queue(q).counts[TaskState.SUCCEEDED] for q in queues) < 3 * tasks:
            time.sleep(0.05)  # polling the counts; the drain takes seconds
        elapsed = time.perf_counter() - start
        after = cpu()
        redis_after = [cpu_seconds(pid) for pid in pids]
    total = 3 * tasks
    found = {
        "tasks/s": total / elapsed,
        "gateway CPU µs/task": (after["gateway0"] - before["gateway0"]) / total * 1e6,
        "worker CPU µs/task": (after["worker"] - before["worker"]) / total * 1e6,
    }
    per_redis = [(b - a) / total * 1e6 for a, b in zip(redis_before, redis_after, strict=True)]
    found["Redis CPU µs/task, all"] = sum(per_redis)
    found["Redis CPU µs/task, busiest process"] = max(per_redis)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=5_000, help="per queue")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    runs: dict[str, list[dict[str, float]]] = {"single": [], "cluster": []}
    for run in range(args.runs):
        for kind in runs:
            found = measure(kind, args.tasks)
            print(f"run {run + 1}, {kind}: {found}", flush=True)
            runs[kind].append(found)
    print("\n| measurement | one Redis | three-primary cluster | cluster ÷ one |")
    print("| --- | --: | --: | --: |")
    for name in runs["single"][0]:
        single = sorted(r[name] for r in runs["single"])[len(runs["single"]) // 2]
        cluster = sorted(r[name] for r in runs["cluster"])[len(runs["cluster"]) // 2]
        print(f"| {name} | {single:,.1f} | {cluster:,.1f} | {cluster / single:.2f} |")


if __name__ == "__main__":
    main()
