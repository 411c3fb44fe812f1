"""Jobgate's sessions in ``bench/peers.py``, built from ``bench/e2e.py``'s pieces.

Python race: N gateway processes and an N-process SDK worker under uvicorn (``e2e.jobgate``);
the two queues ``e2e`` registers give the two variants: one task per push, and pushes of up to
32. HTTP race: N gateway processes pushing one task per request to the user's service
(``bench/service_app.py``, shared with the peers), which verifies each push's signature. Tasks go in
through the SDK in batches of 500 (``e2e.enqueue_batches``: ``Client.enqueue_batch_receipts``;
the full session also times ``Client.enqueue_batch``, whole Tasks) while the queue is paused;
the drain clock starts at the request that resumes it and stops when every task is in the queue's
``done:succeeded`` set. That set is read straight from Redis (one ``ZCARD``, as the peers'
progress is read), not through the API: a ``GET`` of the queue every 10 ms would spend gateway
CPU that the peers' drains do not pay.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import httpx
import redis

from bench.e2e import (
    KEY,
    cpu_reader,
    enqueue_batches,
    enqueue_concurrent,
    fresh_queue,
    gateways,
    jobgate,
)
from bench.enqueue_answers import PlainPost, delay_sender, enqueue_sender, timed
from bench.peers_metrics import (
    BATCHED,
    BATCHES_500,
    BATCHES_500_TASKS,
    DELAY,
    ENQUEUE_CALL,
    ONE,
    PLAIN_POST,
    SINGLE,
    single_in_flight,
)
from bench.peers_options import Options
from bench.peers_session import (
    Drain,
    Session,
    Stage,
    keyspace_bytes,
    per_task_us,
    producer_cpu,
    wait_until,
)
from bench.proc_stat import cpu_seconds
from gateway.store.keys import QueueKeys
from sdk import AsyncClient, Client

WORKER_CONCURRENCY = 128  # in-flight pushes per endpoint, as in bench/e2e.py
HTTP_QUEUE = "http"


def session(stage: Stage, processes: int, race: str, full: bool) -> Session:
    if race == "http":
        return _http_session(stage, processes)
    options = stage.options
    found = Session()
    started = jobgate(stage.redis_url, stage.redis_pid, processes, WORKER_CONCURRENCY, processes)
    with (
        started as (urls, cpu),
        Client(urls[0], KEY, timeout=60) as admin,
        redis.Redis.from_url(stage.redis_url) as progress,
    ):
        drain = _drainer(urls, admin, progress, lambda: _roles(cpu()), options)
        for queue, label in (("bench", ONE), ("bench-batch", BATCHED)):
            found.drains[label] = drain(queue)
        if full:
            found.enqueue[BATCHES_500] = found.drains[ONE].enqueue_rate
            # The same batches answered with whole Tasks (Client.enqueue_batch), for the record.
            whole = fresh_queue(admin, "enqueue-batch-tasks")
            found.enqueue[BATCHES_500_TASKS] = enqueue_batches(
                urls, options.tasks, whole, receipts=False
            )
            count = min(5_000, options.tasks)
            found.enqueue[single_in_flight(options.in_flight)] = enqueue_concurrent(
                urls, count, fresh_queue(admin, "enqueue-many"), options.in_flight, linger=0.0
            )
            # The gateway's CPU per single-task request: one request per task (linger=None).
            queue = fresh_queue(admin, "enqueue-single")
            before = {**_roles(cpu()), "producer": producer_cpu()}
            enqueue_concurrent(urls, count, queue, options.in_flight, linger=None)
            after = {**_roles(cpu()), "producer": producer_cpu()}
            found.enqueue_cpu_us[SINGLE] = per_task_us(before, after, count)
            admin.patch_queue("bench", paused=False)
            asyncio.run(_latency(urls, options, found))
    return found


def _http_session(stage: Stage, processes: int) -> Session:
    """N gateways pushing one task per request to the user's service; its CPU is a role."""
    assert stage.service is not None, "the HTTP race needs the service"
    service = stage.service
    found = Session()
    with (
        gateways(stage.redis_url, processes) as started,
        Client(started[0][0], KEY, timeout=60) as admin,
        redis.Redis.from_url(stage.redis_url) as progress,
    ):
        urls = [url for url, _ in started]
        admin.put_queue(HTTP_QUEUE, max_concurrency=1000, paused=True)
        endpoint = admin.add_endpoint(
            HTTP_QUEUE, service.url + "/jobgate", concurrency=WORKER_CONCURRENCY, batch_size=1
        )
        httpx.put(service.url + "/secret", content=endpoint.secret).raise_for_status()
        cpu = cpu_reader(stage.redis_pid, [proc for _, proc in started])

        def roles() -> dict[str, float]:
            return {**_roles(cpu()), "service": cpu_seconds(service.pid)}

        drain = _drainer(urls, admin, progress, roles, stage.options)
        found.drains[ONE] = drain(HTTP_QUEUE)
    return found


def _drainer(
    urls: list[str],
    admin: Client,
    progress: redis.Redis,
    roles: Callable[[], dict[str, float]],
    options: Options,
) -> Callable[[str], Drain]:
    """A queue's warm-up then its measured drain: ``options.tasks`` enqueued into the paused
    queue, then resumed until all succeeded (read straight from Redis)."""

    def succeeded(queue: str) -> int:
        return int(progress.zcard(QueueKeys.of(queue).succeeded))

    def released(queue: str, target: int) -> float:
        start = time.perf_counter()
        admin.patch_queue(queue, paused=False)
        wait_until(lambda: succeeded(queue) >= target, f"Jobgate drain of {queue}")
        elapsed = time.perf_counter() - start
        admin.patch_queue(queue, paused=True)
        return elapsed

    def drain(queue: str) -> Drain:
        enqueue_batches(urls, options.warmup, queue)
        released(queue, options.warmup)
        memory = keyspace_bytes(progress)
        before = {**roles(), "producer": producer_cpu()}
        enqueue_rate = enqueue_batches(urls, options.tasks, queue)
        queued = (keyspace_bytes(progress) - memory) / options.tasks
        drain_rate = options.tasks / released(queue, options.warmup + options.tasks)
        after = {**roles(), "producer": producer_cpu()}
        return Drain(enqueue_rate, drain_rate, per_task_us(before, after, options.tasks), queued)

    return drain


def _roles(cpu: dict[str, float]) -> dict[str, float]:
    """Gateway processes summed into one role, as the peers' worker processes are (no
    ``worker`` in the HTTP race: the user's service is its own role)."""
    found = {
        "redis": cpu["redis"],
        "gateway": sum(v for name, v in cpu.items() if name.startswith("gateway")),
    }
    if "worker" in cpu:
        found["worker"] = cpu["worker"]
    return found


async def _latency(urls: list[str], options: Options, found: Session) -> None:
    """Stamp tasks at a fixed rate into the running one-push queue, three ways in turn
    (``bench/enqueue_answers.py``): ``AsyncClient.enqueue`` (enqueue to start, as always, and
    its call's answer), then a task's ``.delay()`` and a plain HTTP POST (their answers)."""
    clients = [AsyncClient(url, KEY, timeout=60) for url in urls]
    plain = PlainPost(urls[0])
    samples, rate, reader = options.latency_samples, options.rate, clients[0]
    try:
        started, answered = await timed(enqueue_sender(clients), samples, rate, reader)
        found.latency_ms[ONE], found.answer_ms[ENQUEUE_CALL] = started, answered
        with Client(urls[0], KEY, timeout=60) as client:
            _, found.answer_ms[DELAY] = await timed(delay_sender(client), samples, rate, reader)
        _, found.answer_ms[PLAIN_POST] = await timed(plain.send, samples, rate, reader)
    finally:
        plain.close()
        for client in clients:
            await client.aclose()
