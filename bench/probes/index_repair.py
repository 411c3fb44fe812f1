"""What a pass of the id index's repair costs (:class:`gateway.store.index.IndexRepair`):
``--tasks`` no-op tasks enqueued into a paused queue of a fresh managed Redis, then two passes,
each with its wall time, the Redis process's CPU and the commands it ran per task held (``INFO
commandstats``, the same in every run whatever the machine's load). Run:
``.venv/bin/python -m bench.probes.index_repair``.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from redis.asyncio import Redis

from bench.proc_stat import cpu_seconds
from bench.script_cost import delta, stats
from gateway.core.ids import IdMaker
from gateway.serving.redis_server import ManagedRedis
from gateway.store.clock import ManualClock
from gateway.store.index import IndexRepair
from gateway.store.queues import QueueStore
from gateway.store.records import NewTask
from gateway.store.scripts import Scripts
from gateway.store.tasks import TaskStore
from sdk.wire import QueuePolicy


async def measure(url: str, pid: int, tasks: int) -> None:
    redis = Redis.from_url(url, decode_responses=True)
    scripts = Scripts(redis)
    await scripts.load()
    store, queues, clock = TaskStore(redis, scripts), QueueStore(redis, scripts), ManualClock()
    await queues.put("bench", QueuePolicy(paused=True), clock.now_ms())
    ids = IdMaker()
    for start in range(0, tasks, 500):
        now = clock.now_ms()
        made = ids.take(min(500, tasks - start))
        batch = [NewTask(task_id, "noop", "null", 0, now, now) for task_id in made]
        await store.enqueue("bench", batch, now)
    repair = IndexRepair(redis, scripts)
    print(f"\n{tasks:,} tasks held\n")
    print("| pass | wall s | Redis CPU µs per task | commands per task |")
    print("| --- | --: | --: | --- |")
    for n in (1, 2):
        before, cpu0, t0 = await stats(redis), cpu_seconds(pid), time.perf_counter()
        await repair.repair()
        wall, cpu = time.perf_counter() - t0, cpu_seconds(pid) - cpu0
        found = delta(before, await stats(redis))
        parts = ", ".join(f"{name} {c / tasks:.3f}" for name, (c, _) in sorted(found.items()) if c)
        print(f"| {n} | {wall:.2f} | {cpu / tasks * 1e6:.2f} | {parts} |")
    await redis.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, ManagedRedis(Path(tmp)) as server:
        pid = server.process.pid if server.process else 0
        asyncio.run(measure(server.url, pid, args.tasks))


if __name__ == "__main__":
    main()
