"""Sessions of the Python peers in ``bench/peers.py``: Dramatiq, taskiq and Celery, on the run's
Redis.

Each peer runs its own worker CLI with N processes on the worker modules
``bench/peer_dramatiq.py``, ``bench/peer_taskiq.py`` and ``bench/peer_celery.py``, and this
process is its producer, through the peer's own API. In the Python race the task is a no-op;
in the HTTP race it POSTs a body to the user's service (``bench/service_app.py``). The peers
have no paused queue, so their worker processes are started, warmed up, and stopped with
SIGSTOP while the tasks go in (``Frozen``); the drain clock starts at SIGCONT and stops when the
peer's own Redis state shows no task left: no message left in Dramatiq's message hash, nothing
pending or undelivered in taskiq's consumer group, nothing in Celery's list or unacked hash.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from redis import Redis as SyncRedis
from redis.asyncio import Redis

from bench.peers_options import Options
from bench.peers_session import (
    Drain,
    Frozen,
    Session,
    Stage,
    await_until,
    keyspace_bytes,
    latency_ms,
    paced,
    per_task_us,
    producer_cpu,
)
from bench.proc_stat import cpu_seconds, descendants, tree_cpu_seconds

ROOT = Path(__file__).parents[1]
QUEUE = "bench"  # the queue (Dramatiq) or stream (taskiq) name in the worker modules
STAMPS = "bench:stamps"
READY_TIMEOUT = 60.0
TASKS = {"python": "noop", "http": "post"}  # the task each race sends


def versions() -> str:
    """The peers' versions, for the report's header ("not installed" for a peer a ``--systems``
    run left out and did not need)."""
    found = {}
    for name in ("dramatiq", "taskiq", "taskiq-redis", "celery", "requests", "aiohttp"):
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "not installed"
    return ", ".join(f"{name} {number}" for name, number in found.items())


@dataclass(frozen=True)
class Peer:
    """How to run, feed and watch one peer; its producer API is imported only when used."""

    name: str
    label: str
    enqueue_how: str
    http_how: str  # the HTTP race's task: how it POSTs
    command: Callable[[str], list[str]]  # for a process count, or "N" to show it
    consumers: Callable[[Redis], Awaitable[int]]
    listeners: Callable[[int], int]  # consumers to wait for, for a process count
    left: Callable[[Redis], Awaitable[int]]
    producer: Callable[[str], Awaitable[Producer]]  # for the task to send: "noop" or "post"


class Producer:
    """A peer's enqueue side: one task as fast as its API allows, and stamp tasks."""

    async def send(self, count: int, in_flight: int) -> None:
        raise NotImplementedError

    async def stamp(self, index: int) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        return None


class DramatiqProducer(Producer):
    """``actor.send()``: Dramatiq's API is synchronous, so one message at a time."""

    def __init__(self, task: str) -> None:
        from bench import peer_dramatiq

        self._module = peer_dramatiq
        self._task = task

    async def send(self, count: int, in_flight: int) -> None:
        send = getattr(self._module, self._task).send
        for _ in range(count):
            send()

    async def stamp(self, index: int) -> None:
        self._module.stamp.send(index)


class TaskiqProducer(Producer):
    """``await task.kiq()`` with ``in_flight`` enqueues at a time, as Jobgate's async client."""

    def __init__(self, module: Any, task: str) -> None:
        self._module = module
        self._task = task

    async def send(self, count: int, in_flight: int) -> None:
        gate = asyncio.Semaphore(in_flight)
        kiq = getattr(self._module, self._task).kiq

        async def one() -> None:
            async with gate:
                await kiq()

        await asyncio.gather(*(one() for _ in range(count)))

    async def stamp(self, index: int) -> None:
        await self._module.stamp.kiq(index)

    async def close(self) -> None:
        await self._module.broker.shutdown()


class CeleryProducer(Producer):
    """``task.delay()``: Celery's API is synchronous, so one message at a time."""

    def __init__(self, task: str) -> None:
        from bench import peer_celery

        self._module = peer_celery
        self._task = task

    async def send(self, count: int, in_flight: int) -> None:
        delay = getattr(self._module, self._task).delay
        for _ in range(count):
            delay()

    async def stamp(self, index: int) -> None:
        self._module.stamp.delay(index)


async def _dramatiq_producer(task: str) -> Producer:
    return DramatiqProducer(task)


async def _taskiq_producer(task: str) -> Producer:
    from bench import peer_taskiq

    await peer_taskiq.broker.startup()
    return TaskiqProducer(peer_taskiq, task)


async def _celery_producer(task: str) -> Producer:
    return CeleryProducer(task)


async def _dramatiq_consumers(redis: Redis) -> int:
    """Worker processes that have fetched: each has its own broker id in the heartbeats set."""
    return int(await redis.zcard("dramatiq:__heartbeats__"))


async def _dramatiq_left(redis: Redis) -> int:
    """Messages not yet acknowledged: an ack deletes the message from the queue's hash."""
    return int(await redis.hlen(f"dramatiq:{QUEUE}.msgs"))


async def _taskiq_consumers(redis: Redis) -> int:
    """Worker processes blocked in ``XREADGROUP``: listening, each on its own connection.

    Redis 7.0 lists a stream consumer only once it has been given an entry, so the consumer
    group cannot tell which idle workers are listening yet; the client list can.
    """
    clients = await redis.client_list()
    return sum(1 for c in clients if c.get("cmd") == "xreadgroup" and "b" in c.get("flags", ""))


async def _taskiq_left(redis: Redis) -> int:
    """Entries pending (delivered, not acknowledged) plus not yet delivered (the group's lag).

    taskiq acknowledges after the task ran and its result was saved (``--ack-type`` default).
    """
    for group in await redis.xinfo_groups(QUEUE):
        if group["name"] in ("taskiq", b"taskiq"):
            if group["lag"] is None:
                raise SystemExit("taskiq stream: Redis could not tell the group's lag")
            return int(group["pending"]) + int(group["lag"])
    raise SystemExit("taskiq stream: no consumer group 'taskiq'")


async def _celery_consumers(redis: Redis) -> int:
    """Connections blocked in ``BRPOP``: a Celery worker's main process consumes for its pool."""
    clients = await redis.client_list()
    return sum(1 for c in clients if c.get("cmd") == "brpop" and "b" in c.get("flags", ""))


async def _celery_left(redis: Redis) -> int:
    """Messages in the queue's list plus those delivered and not acknowledged (kombu's
    ``unacked`` hash). Celery acknowledges as a task starts (its default), so the drain's clock
    may stop while the last few (at most the pool's size) still run: microseconds for a no-op,
    one HTTP call in the HTTP race."""
    return int(await redis.llen(QUEUE)) + int(await redis.hlen("unacked"))


PEERS = {
    "dramatiq": Peer(
        name="dramatiq",
        label="Dramatiq",
        enqueue_how="actor.send(), one at a time",
        http_how="a requests.Session per worker thread (8 threads per process)",
        command=lambda n: [
            sys.executable,
            "-m",
            "dramatiq",
            "bench.peer_dramatiq",
            "--processes",
            n,
        ],
        consumers=_dramatiq_consumers,
        listeners=lambda n: n,
        left=_dramatiq_left,
        producer=_dramatiq_producer,
    ),
    "taskiq": Peer(
        name="taskiq",
        label="taskiq (stream)",
        enqueue_how="task.kiq(), {in_flight} in flight",
        http_how="an aiohttp ClientSession per worker process",
        command=lambda n: [
            sys.executable,
            "-m",
            "taskiq",
            "worker",
            "bench.peer_taskiq:broker",
            "--workers",
            n,
            "--log-level",
            "WARNING",
        ],
        consumers=_taskiq_consumers,
        listeners=lambda n: n,
        left=_taskiq_left,
        producer=_taskiq_producer,
    ),
    "celery": Peer(
        name="celery",
        label="Celery",
        enqueue_how="task.delay(), one at a time",
        http_how="a requests.Session per pool process",
        command=lambda n: [
            sys.executable,
            "-m",
            "celery",
            "--app",
            "bench.peer_celery",
            "worker",
            "--concurrency",
            n,
            "--loglevel",
            "WARNING",
        ],
        consumers=_celery_consumers,
        listeners=lambda n: 1,
        left=_celery_left,
        producer=_celery_producer,
    ),
}


def session(peer: Peer, stage: Stage, processes: int, race: str, full: bool) -> Session:
    """One session of ``peer`` with ``processes`` worker processes in ``race``; ``full`` adds
    the enqueue rate and the idle latency (Python race only)."""
    log = stage.logs / f"{peer.name}-{race}-{processes}.log"
    env = {**os.environ, "BENCH_REDIS_URL": stage.redis_url}
    if stage.service is not None:
        env["BENCH_SERVICE_URL"] = stage.service.url
    with log.open("ab") as out:
        worker = subprocess.Popen(
            peer.command(str(processes)), cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        return asyncio.run(_session(peer, worker, stage, processes, race, full))
    except BaseException:
        print(f"{peer.name} failed; its output is in {log}", file=sys.stderr)
        raise
    finally:
        _stop(worker)


async def _session(
    peer: Peer,
    worker: subprocess.Popen[bytes],
    stage: Stage,
    processes: int,
    race: str,
    full: bool,
) -> Session:
    options = stage.options
    found = Session()
    redis = Redis.from_url(stage.redis_url)
    memory_reader = SyncRedis.from_url(stage.redis_url)  # nothing else runs while it reads
    producer: Producer | None = None
    try:

        async def ready() -> bool:
            if worker.poll() is not None:
                raise SystemExit(f"{peer.name} workers exited with {worker.returncode}")
            return await peer.consumers(redis) >= peer.listeners(processes)

        await await_until(ready, f"{peer.name}: {processes} worker processes", READY_TIMEOUT)
        producer = await peer.producer(TASKS[race])

        async def drained() -> bool:
            return await peer.left(redis) == 0

        await producer.send(options.warmup, options.in_flight)
        await await_until(drained, f"{peer.name} warm-up")

        frozen = Frozen(worker.pid)
        frozen.stop()
        try:
            memory = keyspace_bytes(memory_reader)
            before = _cpu(stage, worker.pid)
            start = time.perf_counter()
            await producer.send(options.tasks, options.in_flight)
            enqueue_rate = options.tasks / (time.perf_counter() - start)
            queued = (keyspace_bytes(memory_reader) - memory) / options.tasks
        finally:
            start = time.perf_counter()
            frozen.resume()

        async def drained_by_the_same_processes() -> bool:
            if not frozen.all_alive():
                raise SystemExit(f"{peer.name}: a worker process died during the drain")
            return await drained()

        await await_until(drained_by_the_same_processes, f"{peer.name} drain")
        drain_rate = options.tasks / (time.perf_counter() - start)
        after = _cpu(stage, worker.pid)
        found.drains[peer.label] = Drain(
            enqueue_rate, drain_rate, per_task_us(before, after, options.tasks), queued
        )
        if full:
            found.enqueue[peer.label] = enqueue_rate
            latency = await _latency(peer, producer, redis, options)
            found.latency_ms[peer.label], found.answer_ms[peer.label] = latency
    finally:
        if producer is not None:
            await producer.close()
        await redis.aclose()
        memory_reader.close()
    return found


def _cpu(stage: Stage, worker_pid: int) -> dict[str, float]:
    found = {
        "redis": cpu_seconds(stage.redis_pid),
        "worker": tree_cpu_seconds(worker_pid),
        "producer": producer_cpu(),
    }
    if stage.service is not None:
        found["service"] = cpu_seconds(stage.service.pid)
    return found


async def _latency(
    peer: Peer, producer: Producer, redis: Redis, options: Options
) -> tuple[list[float], list[float]]:
    """Stamp tasks at a fixed rate on the idle peer; each records its start time in Redis.
    Enqueue to start, and the enqueue call's own duration (ms)."""
    await redis.delete(STAMPS)
    sent: dict[int, float] = {}
    answered: dict[int, float] = {}

    async def send(index: int) -> None:
        sent[index] = time.time()
        await producer.stamp(index)
        answered[index] = time.time()

    await paced(options.latency_samples, options.rate, send)

    async def all_started() -> bool:
        return int(await redis.llen(STAMPS)) >= options.latency_samples

    await await_until(all_started, f"{peer.name} latency stamps")
    started = {}
    for entry in await redis.lrange(STAMPS, 0, -1):
        index, when = entry.split()
        started[int(index)] = float(when)
    return latency_ms(sent, started), latency_ms(sent, answered)


def _stop(worker: subprocess.Popen[bytes]) -> None:
    """SIGTERM the worker CLI (it stops its processes); whatever is left after 15 s is killed."""
    below = descendants(worker.pid)
    worker.terminate()
    try:
        worker.wait(15)
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.wait(5)
    for pid in below:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue
