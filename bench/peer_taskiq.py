"""The taskiq side of ``bench/peers.py``: a no-op task, a start-time task, an HTTP-calling task.

Served by taskiq's own CLI (``taskiq worker bench.peer_taskiq:broker --workers N``), the way its
users run it: async tasks, default worker options (acknowledged once the result is saved), the
Redis *stream* broker of taskiq-redis on the benchmark's Redis (``BENCH_REDIS_URL``). The
benchmark process imports it too, to send.
"""

from __future__ import annotations

import os
import time

import aiohttp
from redis.asyncio import Redis
from taskiq_redis import RedisStreamBroker

from bench.service_body import BODY, PATH

QUEUE = "bench"
STAMPS = "bench:stamps"

# socket_timeout=None: redis-py 8 reads with a 5 s socket timeout by default. bench/peers.py
# stops the worker processes (SIGSTOP) while the tasks go in; a worker stopped for longer than
# that inside its blocking XREADGROUP finds the timeout expired when it resumes, crashes, and the
# entries it was handed wait 10 minutes for taskiq to reclaim them. While running, the read
# ends within XREADGROUP's own 2 s block anyway, so this changes nothing else.
broker = RedisStreamBroker(url=os.environ["BENCH_REDIS_URL"], queue_name=QUEUE, socket_timeout=None)
_stamps: list[Redis] = []  # one client per worker process, made on first use
_sessions: list[aiohttp.ClientSession] = []  # likewise: one keep-alive session per process


@broker.task
async def noop() -> None:
    return None


@broker.task
async def stamp(index: int) -> None:
    """Records when the worker started it, on this machine's clock, under its arrival index."""
    started = time.time()
    if not _stamps:
        _stamps.append(Redis.from_url(os.environ["BENCH_REDIS_URL"]))
    await _stamps[0].rpush(STAMPS, f"{index} {started!r}")


@broker.task
async def post() -> None:
    """The HTTP race's task: the same body to the user's service over a shared aiohttp session."""
    if not _sessions:
        _sessions.append(aiohttp.ClientSession())
    async with _sessions[0].post(
        os.environ["BENCH_SERVICE_URL"] + PATH,
        data=BODY,
        headers={"content-type": "application/json"},
    ) as answer:
        await answer.read()
        answer.raise_for_status()
