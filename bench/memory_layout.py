"""Where a queued task's Redis memory goes: ``--tasks`` no-op tasks (the peers race's: name
``bench.worker_app.noop``, no payload) enqueued through the store into a paused queue of a fresh
managed Redis, then each key's ``MEMORY USAGE`` (``SAMPLES 0``: every element counted) and
encoding, summed by kind (the id index's buckets ``jg:ix:<bucket>`` as one kind, and older
versions' ``jg:idx:<id>`` entries) and divided by the task count, beside the mean length of what
each task stores and ``INFO``'s ``used_memory`` growth (which also counts what ``MEMORY USAGE``
leaves out: the main dictionary's entries and expiries, but moves with client buffers). Ids are
made as the gateway makes them (:class:`gateway.core.ids.IdMaker`, counting up) unless
``--random-ids`` (as clients choosing ULIDs of their own would). Run:
``.venv/bin/python -m bench.memory_layout``.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import cast

from redis.asyncio import Redis
from ulid import ULID

from gateway.core.ids import IdMaker
from gateway.serving.redis_server import ManagedRedis
from gateway.store.clock import ManualClock
from gateway.store.keys import QueueKeys
from gateway.store.queues import QueueStore
from gateway.store.records import NewTask
from gateway.store.scripts import Scripts
from gateway.store.tasks import TaskStore
from sdk.wire import QueuePolicy

NAME = "bench.worker_app.noop"
TARGET_BYTES = 300  # issue 32, item 2: memory per queued no-op task
QUEUE = "bench"


def kind_of(key: str) -> str:
    """A key with its task id (or other per-item part) replaced, so keys of one kind add up."""
    key = re.sub(r"^jg:ix:[0-3][0-9A-HJKMNP-TV-Z]{2}$", "jg:ix:<bucket>", key)
    return re.sub(r"[0-9A-HJKMNP-TV-Z]{26}", "<id>", key)


async def measure(url: str, tasks: int, random_ids: bool, compact_records: bool) -> None:
    redis = Redis.from_url(url, decode_responses=True)
    scripts = Scripts(redis, compact_records=compact_records)
    await scripts.load()
    store, queues, clock = TaskStore(redis, scripts), QueueStore(redis, scripts), ManualClock()
    await queues.put(QUEUE, QueuePolicy(paused=True), clock.now_ms())
    before = {key: await redis.memory_usage(key, samples=0) or 0 async for key in redis.scan_iter()}
    used_before = int((await redis.info("memory"))["used_memory"])
    ids = IdMaker()
    for start in range(0, tasks, 500):
        now = clock.now_ms()
        count = min(500, tasks - start)
        made = [str(ULID()) for _ in range(count)] if random_ids else ids.take(count)
        batch = [
            NewTask(
                id=made[i],
                name=NAME,
                payload_json="null",
                priority=0,
                created_ms=now,
                run_at_ms=now,
            )
            for i in range(count)
        ]
        await store.enqueue(QUEUE, batch, now)
    used = int((await redis.info("memory"))["used_memory"]) - used_before
    by_kind: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    encodings: dict[str, set[str]] = defaultdict(set)
    async for key in redis.scan_iter(count=1000):
        size = (await redis.memory_usage(key, samples=0) or 0) - before.get(key, 0)
        kind = kind_of(key)
        by_kind[kind][0] += size
        by_kind[kind][1] += 1
        kind_type = cast(str, await redis.type(key))
        encodings[kind].add(f"{kind_type} {await redis.object('encoding', key)}")
    k = QueueKeys.of(QUEUE)
    records = cast(list[str], await redis.hvals(k.meta))
    members = cast(list[str], await redis.zrange(k.ready, 0, -1))
    shape = ", compact records" if compact_records else ""
    print(f"\n{tasks:,} queued no-op tasks{shape}\n")
    print("| key | type, encoding | keys | bytes per task |")
    print("| --- | --- | --: | --: |")
    total = 0.0
    for kind, (size, count) in sorted(by_kind.items(), key=lambda kv: -kv[1][0]):
        if size:
            total += size / tasks
            encoding = ", ".join(sorted(encodings[kind]))
            print(f"| `{kind}` | {encoding} | {count:,} | {size / tasks:.1f} |")
    print(f"| total | | | {total:.1f} |")
    verdict = "met" if total <= TARGET_BYTES else "not met"
    print(f"\ntarget (issue 32): ≤ {TARGET_BYTES} bytes per queued no-op task: {verdict}")
    print(f"\nused_memory grew by {used / tasks:.1f} bytes per task")
    print(f"\nrecord: {sum(map(len, records)) / len(records):.1f} bytes, e.g. {records[-1]}")
    print(f"ready member: {sum(map(len, members)) / len(members):.1f} bytes, e.g. {members[-1]}")
    await redis.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--random-ids", action="store_true", help="random ULIDs, not counting up")
    parser.add_argument(
        "--compact-records", action="store_true", help="the gateway's compact_records setting"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, ManagedRedis(Path(tmp)) as server:
        asyncio.run(measure(server.url, args.tasks, args.random_ids, args.compact_records))


if __name__ == "__main__":
    main()
