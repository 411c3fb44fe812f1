"""Redis time per task of each hot script, alone: enqueue, claim and finish through the store, on a
fresh managed Redis, with no gateway, worker or HTTP in the way.

``--tasks`` no-op tasks are enqueued in batches of ``--batch`` (500), claimed ``--claim`` at a
time, then each claim's tasks finished as succeeded in one call (what the dispatcher does under
load). Redis's own accounting (``INFO commandstats``: µs inside EVALSHA and inside every command
the scripts ran) gives the time per task of each script, and the process CPU from ``/proc`` the
whole cost (reading, parsing, answering). Use it to see what a change to a script costs, before
and after in one run. Run: ``.venv/bin/python -m bench.script_cost``.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

from redis.asyncio import Redis
from ulid import ULID

from bench.proc_stat import cpu_seconds
from gateway.serving.redis_server import ManagedRedis
from gateway.store.clock import ManualClock
from gateway.store.endpoint_records import EndpointRecord
from gateway.store.queues import QueueStore
from gateway.store.records import Lease, NewTask
from gateway.store.scripts import Scripts
from gateway.store.tasks import Finish, TaskStore
from sdk.wire import AttemptOutcome, QueuePolicy

PAYLOAD = '{"args":[],"kwargs":{}}'


async def stats(redis: Redis) -> dict[str, tuple[int, int]]:
    """command → (calls, µs) so far."""
    found = await redis.info("commandstats")
    return {
        name.removeprefix("cmdstat_"): (int(v["calls"]), int(v["usec"]))
        for name, v in found.items()
    }


def delta(
    before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]
) -> dict[str, tuple[int, int]]:
    return {
        name: (calls - before.get(name, (0, 0))[0], usec - before.get(name, (0, 0))[1])
        for name, (calls, usec) in after.items()
        if calls != before.get(name, (0, 0))[0]
    }


Phase = tuple[str, Callable[[], Awaitable[None]]]


async def phases(
    redis: Redis,
    tasks: int,
    claim: int,
    payload: str = PAYLOAD,
    *,
    batch: int = 500,
    deep: int = 0,
    compact_records: bool = False,
) -> list[Phase]:
    """A queue and its endpoint set up through the store, and the four phases to run on them
    in order: enqueue ``tasks`` in batches of ``batch``, claim them ``claim`` at a time, finish
    each claim's tasks as succeeded in one call, sweep them past their retention (500 a call).
    With ``deep``, that many tasks wait in another (paused) queue first, so the shared
    structures (the id index) are as full as a deep backlog makes them. ``compact_records``: the
    gateway's setting of that name."""
    scripts = Scripts(redis, compact_records=compact_records)
    await scripts.load()
    store, queues, clock = TaskStore(redis, scripts), QueueStore(redis, scripts), ManualClock()
    await queues.put("q", QueuePolicy(max_concurrency=100_000), clock.now_ms())
    endpoint = EndpointRecord(
        id="ep1",
        queue="q",
        url="http://127.0.0.1:1/",
        concurrency=100_000,
        capabilities=[],
        secrets=["whsec_x"],
        created_ms=clock.now_ms(),
    )
    await queues.add_endpoint(endpoint)

    async def fill(queue: str, count: int, size: int) -> None:
        for start in range(0, count, size):
            now = clock.now_ms()
            made = [
                NewTask(
                    id=str(ULID()),
                    name="noop",
                    payload_json=payload,
                    priority=0,
                    created_ms=now,
                    run_at_ms=now,
                )
                for _ in range(min(size, count - start))
            ]
            await store.enqueue(queue, made, now)

    if deep:
        await queues.put("deep", QueuePolicy(paused=True), clock.now_ms())
        await fill("deep", deep, 500)

    async def enqueue() -> None:
        await fill("q", tasks, batch)

    leases: list[list[Lease]] = []

    async def claim_all() -> None:
        done = 0
        while done < tasks:
            got = await store.claim("q", claim, secrets.token_hex(16), clock.now_ms())
            leases.append(got.leases)
            done += len(got.leases)

    async def finish_all() -> None:
        for group in leases:
            ends = [
                Finish(lease.task_id, lease.token, AttemptOutcome.SUCCEEDED, 200, "null")
                for lease in group
            ]
            await store.finish_many("q", ends, clock.now_ms())

    async def sweep_all() -> None:  # past the default retention (7 days), in calls of 500
        later = clock.now_ms() + 8 * 86_400_000
        while await store.sweep("q", later, 500):
            pass

    return [
        ("enqueue", enqueue),
        ("claim", claim_all),
        ("finish", finish_all),
        ("sweep", sweep_all),
    ]


async def measure(
    url: str, pid: int, tasks: int, claim: int, calls: bool = False, batch: int = 500
) -> None:
    redis = Redis.from_url(url, decode_responses=True)
    steps = await phases(redis, tasks, claim, batch=batch)
    print(f"\n{tasks:,} tasks enqueued {batch} a call, claims of {claim}\n")
    print("| phase | µs per task in scripts | Redis CPU µs per task | per command µs/task |")
    print("| --- | --: | --: | --- |")
    for phase, run in steps:
        before, cpu0 = await stats(redis), cpu_seconds(pid)
        await run()
        found, cpu = delta(before, await stats(redis)), cpu_seconds(pid) - cpu0
        inside = found.pop("evalsha", (0, 0))
        if calls:  # commands run per task: the same in every run, whatever the machine's load
            parts = ", ".join(
                f"{name} {n / tasks:.3f}" for name, (n, _) in sorted(found.items()) if n
            )
        else:
            parts = ", ".join(
                f"{name} {usec / tasks:.1f}"
                for name, (_, usec) in sorted(found.items(), key=lambda kv: -kv[1][1])
                if usec / tasks >= 0.1
            )
        print(f"| {phase} | {inside[1] / tasks:.1f} | {cpu / tasks * 1e6:.1f} | {parts} |")
    await redis.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--claim", type=int, default=32)
    parser.add_argument("--batch", type=int, default=500, help="tasks per enqueue call")
    parser.add_argument(
        "--calls", action="store_true", help="commands per task instead of µs per command"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, ManagedRedis(Path(tmp)) as server:
        pid = server.process.pid if server.process else 0
        asyncio.run(measure(server.url, pid, args.tasks, args.claim, args.calls, args.batch))


if __name__ == "__main__":
    main()
