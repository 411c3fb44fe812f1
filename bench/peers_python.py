"""Sessions of the Python peers in ``bench/peers.py``: Dramatiq and taskiq, on the run's Redis.

Each peer runs its own worker CLI with N processes on the worker modules
``bench/peer_dramatiq.py`` and ``bench/peer_taskiq.py``, and this process is its producer,
through the peer's own API. The peers have no paused queue, so their worker processes are
started, warmed up, and stopped with SIGSTOP while the tasks go in (``Frozen``); the drain
clock starts at SIGCONT and stops when the peer's own Redis state shows no task left: no message
left in Dramatiq's message hash, nothing pending or undelivered in taskiq's consumer group.
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

from redis.asyncio import Redis

from bench.peers_options import Options
from bench.peers_session import (
    Drain,
    Frozen,
    Session,
    Stage,
    await_until,
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


def versions() -> str:
    """The peers' versions, for the report's header."""
    found = {
        name: importlib.metadata.version(name) for name in ("dramatiq", "taskiq", "taskiq-redis")
    }
    return ", ".join(f"{name} {number}" for name, number in found.items())


@dataclass(frozen=True)
class Peer:
    """How to run, feed and watch one peer; its producer API is imported only when used."""

    name: str
    label: str
    enqueue_how: str
    command: Callable[[str], list[str]]  # for a process count, or "N" to show it
    consumers: Callable[[Redis], Awaitable[int]]
    left: Callable[[Redis], Awaitable[int]]
    producer: Callable[[], Awaitable[Producer]]


class Producer:
    """A peer's enqueue side: no-op tasks as fast as its API allows, and stamp tasks."""

    async def noops(self, count: int, in_flight: int) -> None:
        raise NotImplementedError

    async def stamp(self, index: int) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        return None


class DramatiqProducer(Producer):
    """``actor.send()``: Dramatiq's API is synchronous, so one message at a time."""

    def __init__(self) -> None:
        from bench import peer_dramatiq

        self._module = peer_dramatiq

    async def noops(self, count: int, in_flight: int) -> None:
        send = self._module.noop.send
        for _ in range(count):
            send()

    async def stamp(self, index: int) -> None:
        self._module.stamp.send(index)


class TaskiqProducer(Producer):
    """``await task.kiq()`` with ``in_flight`` enqueues at a time, as Jobgate's async client."""

    def __init__(self, module: Any) -> None:
        self._module = module

    async def noops(self, count: int, in_flight: int) -> None:
        gate = asyncio.Semaphore(in_flight)
        kiq = self._module.noop.kiq

        async def one() -> None:
            async with gate:
                await kiq()

        await asyncio.gather(*(one() for _ in range(count)))

    async def stamp(self, index: int) -> None:
        await self._module.stamp.kiq(index)

    async def close(self) -> None:
        await self._module.broker.shutdown()


async def _dramatiq_producer() -> Producer:
    return DramatiqProducer()


async def _taskiq_producer() -> Producer:
    from bench import peer_taskiq

    await peer_taskiq.broker.startup()
    return TaskiqProducer(peer_taskiq)


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


PEERS = {
    "dramatiq": Peer(
        name="dramatiq",
        label="Dramatiq",
        enqueue_how="actor.send(), one at a time",
        command=lambda n: [
            sys.executable,
            "-m",
            "dramatiq",
            "bench.peer_dramatiq",
            "--processes",
            n,
        ],
        consumers=_dramatiq_consumers,
        left=_dramatiq_left,
        producer=_dramatiq_producer,
    ),
    "taskiq": Peer(
        name="taskiq",
        label="taskiq (stream)",
        enqueue_how="task.kiq(), {in_flight} in flight",
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
        left=_taskiq_left,
        producer=_taskiq_producer,
    ),
}


def session(peer: Peer, stage: Stage, processes: int, full: bool) -> Session:
    log = stage.logs / f"{peer.name}-{processes}.log"
    with log.open("ab") as out:
        worker = subprocess.Popen(
            peer.command(str(processes)),
            cwd=ROOT,
            env={**os.environ, "BENCH_REDIS_URL": stage.redis_url},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        return asyncio.run(_session(peer, worker, stage, processes, full))
    except BaseException:
        print(f"{peer.name} failed; its output is in {log}", file=sys.stderr)
        raise
    finally:
        _stop(worker)


async def _session(
    peer: Peer, worker: subprocess.Popen[bytes], stage: Stage, processes: int, full: bool
) -> Session:
    options, redis_pid = stage.options, stage.redis_pid
    found = Session()
    redis = Redis.from_url(stage.redis_url)
    producer: Producer | None = None
    try:

        async def ready() -> bool:
            if worker.poll() is not None:
                raise SystemExit(f"{peer.name} workers exited with {worker.returncode}")
            return await peer.consumers(redis) >= processes

        await await_until(ready, f"{peer.name}: {processes} worker processes", READY_TIMEOUT)
        producer = await peer.producer()

        async def drained() -> bool:
            return await peer.left(redis) == 0

        await producer.noops(options.warmup, options.in_flight)
        await await_until(drained, f"{peer.name} warm-up")

        frozen = Frozen(worker.pid)
        frozen.stop()
        try:
            before = _cpu(redis_pid, worker.pid)
            start = time.perf_counter()
            await producer.noops(options.tasks, options.in_flight)
            enqueue_rate = options.tasks / (time.perf_counter() - start)
        finally:
            start = time.perf_counter()
            frozen.resume()

        async def drained_by_the_same_processes() -> bool:
            if not frozen.all_alive():
                raise SystemExit(f"{peer.name}: a worker process died during the drain")
            return await drained()

        await await_until(drained_by_the_same_processes, f"{peer.name} drain")
        drain_rate = options.tasks / (time.perf_counter() - start)
        after = _cpu(redis_pid, worker.pid)
        found.drains[peer.label] = Drain(
            enqueue_rate, drain_rate, per_task_us(before, after, options.tasks)
        )
        if full:
            found.enqueue[peer.label] = enqueue_rate
            found.latency_ms[peer.label] = await _latency(peer, producer, redis, options)
    finally:
        if producer is not None:
            await producer.close()
        await redis.aclose()
    return found


def _cpu(redis_pid: int, worker_pid: int) -> dict[str, float]:
    return {
        "redis": cpu_seconds(redis_pid),
        "worker": tree_cpu_seconds(worker_pid),
        "producer": producer_cpu(),
    }


async def _latency(peer: Peer, producer: Producer, redis: Redis, options: Options) -> list[float]:
    """Stamp tasks at a fixed rate on the idle peer; each records its start time in Redis."""
    await redis.delete(STAMPS)
    sent: dict[int, float] = {}

    async def send(index: int) -> None:
        sent[index] = time.time()
        await producer.stamp(index)

    await paced(options.latency_samples, options.rate, send)

    async def all_started() -> bool:
        return int(await redis.llen(STAMPS)) >= options.latency_samples

    await await_until(all_started, f"{peer.name} latency stamps")
    started = {}
    for entry in await redis.lrange(STAMPS, 0, -1):
        index, when = entry.split()
        started[int(index)] = float(when)
    return latency_ms(sent, started)


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
