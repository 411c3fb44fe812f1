"""What every system's session in ``bench/peers.py`` shares: figures, pacing, waiting, pausing.

A session is one system started with N worker processes on the run's Redis: a warm-up, then the
drain (N tasks enqueued while nothing consumes them, then consumed), and in the first session of
a run also the enqueue rates and the idle latency.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from bench.peers_options import Options
from bench.proc_stat import cpu_seconds, descendants

POLL = 0.01  # seconds between completion checks, the same for every system
DEADLINE = 300.0  # seconds any one wait may take before the run is abandoned


@dataclass(frozen=True)
class Service:
    """The user's HTTP service of the HTTP race (``bench/service_app.py``): one process."""

    url: str
    pid: int


@dataclass(frozen=True)
class Stage:
    """What every session of an invocation shares: its Redis, its options, a folder for logs;
    in the HTTP race also the user's service (None in the Python race)."""

    redis_url: str
    redis_pid: int
    options: Options
    logs: Path
    service: Service | None = None


@dataclass(frozen=True)
class Drain:
    """One drain: enqueue rate, drain rate, CPU µs per task of each role over both, and the
    Redis memory each queued task held (bytes, measured before the release)."""

    enqueue_rate: float
    drain_rate: float
    cpu_us: dict[str, float]
    queued_bytes: float | None = None


@dataclass
class Session:
    """A session's figures, by system label (Jobgate has two variants in one session)."""

    drains: dict[str, Drain] = field(default_factory=dict)
    enqueue: dict[str, float] = field(default_factory=dict)
    enqueue_cpu_us: dict[str, dict[str, float]] = field(default_factory=dict)  # per role
    latency_ms: dict[str, list[float]] = field(default_factory=dict)
    answer_ms: dict[str, list[float]] = field(default_factory=dict)  # the enqueue call's own


def producer_cpu() -> float:
    """CPU seconds of this process: the producer (its polling during a drain is counted too)."""
    return cpu_seconds(os.getpid())


def per_task_us(before: dict[str, float], after: dict[str, float], tasks: int) -> dict[str, float]:
    found = {role: (after[role] - before[role]) / tasks * 1e6 for role in after}
    found["total"] = sum(found.values())
    return found


def keyspace_bytes(client: redis.Redis) -> int:
    """Bytes every key and its value take (``MEMORY USAGE key SAMPLES 0``, summed over a
    ``SCAN``): what stored tasks cost, without Redis's transient buffers.

    ``INFO``'s ``used_memory`` also moves with the clients' buffers and whatever Redis frees
    in the background: read before and after a peer's enqueue it fell by more than the 10,000
    queued tasks took (taskiq's came out below 0 bytes each). The sum leaves out only the main
    dictionary's bucket arrays (8 bytes per slot, a power of two at least the key count).
    """
    keys = list(client.scan_iter(count=1000))
    sizes = client.pipeline(transaction=False)
    for key in keys:
        sizes.memory_usage(key, samples=0)
    return sum(size or 0 for size in sizes.execute())  # None: the key expired meanwhile


def wait_until(done: Callable[[], bool], what: str, timeout: float = DEADLINE) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise SystemExit(f"{what}: not done within {timeout:.0f} s")
        time.sleep(POLL)


async def await_until(
    done: Callable[[], Awaitable[bool]], what: str, timeout: float = DEADLINE
) -> None:
    deadline = time.monotonic() + timeout
    while not await done():
        if time.monotonic() > deadline:
            raise SystemExit(f"{what}: not done within {timeout:.0f} s")
        await asyncio.sleep(POLL)


async def paced(count: int, rate: float, send: Callable[[int], Coroutine[Any, Any, None]]) -> None:
    """Starts ``send(i)`` at ``i / rate`` seconds from now, whether or not earlier ones ended.

    A fixed arrival rate (an open loop), so a slow answer does not slow the arrivals and hide
    the delay from the figures. Each ``send`` takes its own clock reading just before the
    enqueue call.
    """
    start = time.monotonic()
    running: list[asyncio.Task[None]] = []
    for index in range(count):
        delay = start + index / rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        running.append(asyncio.create_task(send(index)))
    await asyncio.gather(*running)


def latency_ms(sent: dict[int, float], started: dict[int, float]) -> list[float]:
    """Enqueue-to-start delays in ms, for each arrival index found in both."""
    return [(started[i] - sent[i]) * 1000 for i in sorted(sent) if i in started]


class Frozen:
    """SIGSTOP a process tree, then SIGCONT it: a queue nobody consumes, for any system.

    Dramatiq and taskiq have no paused queue; stopping their already started and warmed worker
    processes while the tasks go in gives them the same start as Jobgate's paused queue, without
    counting their start-up in the drain.
    """

    def __init__(self, pid: int) -> None:
        self._pids = [pid, *descendants(pid)]

    def stop(self) -> None:
        for pid in self._pids:
            os.kill(pid, signal.SIGSTOP)

    def resume(self) -> None:
        for pid in self._pids:
            os.kill(pid, signal.SIGCONT)

    def all_alive(self) -> bool:
        """False once any of the stopped processes is gone (a crashed worker strands tasks)."""
        try:
            for pid in self._pids:
                os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
