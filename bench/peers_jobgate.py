"""Jobgate's session in ``bench/peers.py``, built from ``bench/e2e.py``'s pieces.

N gateway processes and an N-process SDK worker under uvicorn (``e2e.jobgate``); the two queues
``e2e`` registers give the two variants: one task per push, and pushes of up to 32. Tasks go in
through the SDK in batches of 500 (``e2e.enqueue_batches``) while the queue is paused; the drain
clock starts at the request that resumes it and stops when every task is in the queue's
``done:succeeded`` set. That set is read straight from Redis (one ``ZCARD``, as the peers'
progress is read), not through the API: a ``GET`` of the queue every 10 ms would spend gateway
CPU that the peers' drains do not pay.
"""

from __future__ import annotations

import asyncio
import time

import redis

from bench.e2e import (
    BATCH_SIZE,
    KEY,
    STAMP,
    enqueue_batches,
    enqueue_concurrent,
    fresh_queue,
    jobgate,
)
from bench.peers_options import Options
from bench.peers_session import (
    Drain,
    Session,
    Stage,
    latency_ms,
    paced,
    per_task_us,
    producer_cpu,
    wait_until,
)
from gateway.store.keys import QueueKeys
from sdk import AsyncClient, Client

ONE = "Jobgate, one push each"
BATCHED = f"Jobgate, pushes of up to {BATCH_SIZE}"
SINGLE_64 = "Jobgate, single enqueues (SDK defaults, coalesced), {in_flight} in flight"
BATCHES_500 = "Jobgate, batches of 500"
WORKER_CONCURRENCY = 128  # in-flight pushes per endpoint, as in bench/e2e.py
RESULT_WAITS = 16  # concurrent result reads after the latency run


def session(stage: Stage, processes: int, full: bool) -> Session:
    options = stage.options
    found = Session()
    started = jobgate(stage.redis_url, stage.redis_pid, processes, WORKER_CONCURRENCY, processes)
    with (
        started as (urls, cpu),
        Client(urls[0], KEY, timeout=60) as admin,
        redis.Redis.from_url(stage.redis_url) as progress,
    ):

        def succeeded(queue: str) -> int:
            return int(progress.zcard(QueueKeys.of(queue).succeeded))

        def drain(queue: str, done_before: int) -> Drain:
            """``options.tasks`` into the paused queue, then resumed until all succeeded."""
            before = {**_roles(cpu()), "producer": producer_cpu()}
            enqueue_rate = enqueue_batches(urls, options.tasks, queue)
            start = time.perf_counter()
            admin.patch_queue(queue, paused=False)
            target = done_before + options.tasks
            wait_until(lambda: succeeded(queue) >= target, f"Jobgate drain of {queue}")
            drain_rate = options.tasks / (time.perf_counter() - start)
            after = {**_roles(cpu()), "producer": producer_cpu()}
            admin.patch_queue(queue, paused=True)
            return Drain(enqueue_rate, drain_rate, per_task_us(before, after, options.tasks))

        def warm_up(queue: str) -> None:
            enqueue_batches(urls, options.warmup, queue)
            admin.patch_queue(queue, paused=False)
            wait_until(lambda: succeeded(queue) >= options.warmup, f"Jobgate warm-up of {queue}")
            admin.patch_queue(queue, paused=True)

        for queue, label in (("bench", ONE), ("bench-batch", BATCHED)):
            warm_up(queue)
            found.drains[label] = drain(queue, options.warmup)
        if full:
            found.enqueue[BATCHES_500] = found.drains[ONE].enqueue_rate
            count = min(5_000, options.tasks)
            found.enqueue[SINGLE_64.format(in_flight=options.in_flight)] = enqueue_concurrent(
                urls, count, fresh_queue(admin, "enqueue-many"), options.in_flight, linger=0.0
            )
            admin.patch_queue("bench", paused=False)
            found.latency_ms[ONE] = asyncio.run(_latency(urls, options))
    return found


def _roles(cpu: dict[str, float]) -> dict[str, float]:
    """Gateway processes summed into one role, as the peers' worker processes are."""
    return {
        "redis": cpu["redis"],
        "gateway": sum(v for name, v in cpu.items() if name.startswith("gateway")),
        "worker": cpu["worker"],
    }


async def _latency(urls: list[str], options: Options) -> list[float]:
    """Stamp tasks at a fixed rate into the running one-push queue; their results are start times.

    The stamp task returns ``time.time()`` when the worker starts it, and Jobgate keeps results,
    so they are read back afterwards rather than recorded by the task.
    """
    clients = [AsyncClient(url, KEY, timeout=60) for url in urls]
    sent: dict[int, float] = {}
    ids: dict[int, str] = {}

    async def send(index: int) -> None:
        client = clients[index % len(clients)]
        sent[index] = time.time()
        ids[index] = (await client.enqueue("bench", STAMP)).id

    try:
        await paced(options.latency_samples, options.rate, send)
        started: dict[int, float] = {}
        gate = asyncio.Semaphore(RESULT_WAITS)

        async def read(index: int) -> None:
            async with gate:
                result = (await clients[0].wait(ids[index], timeout=60)).result
            assert isinstance(result, float), result
            started[index] = result

        await asyncio.gather(*(read(i) for i in ids))
    finally:
        for client in clients:
            await client.aclose()
    return latency_ms(sent, started)
