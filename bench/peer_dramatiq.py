"""The Dramatiq side of ``bench/peers.py``: a no-op actor and a start-time actor.

Served by Dramatiq's own CLI (``dramatiq bench.peer_dramatiq --processes N``), the way its
users run it: sync actors on worker threads, the default middleware, the Redis broker on the
benchmark's Redis (``BENCH_REDIS_URL``). The benchmark process imports it too, to send.
"""

from __future__ import annotations

import os
import time

import dramatiq
from dramatiq.brokers.redis import RedisBroker

QUEUE = "bench"
STAMPS = "bench:stamps"

broker = RedisBroker(url=os.environ["BENCH_REDIS_URL"])  # type: ignore[no-untyped-call]
dramatiq.set_broker(broker)


@dramatiq.actor(queue_name=QUEUE)
def noop() -> None:
    return None


@dramatiq.actor(queue_name=QUEUE)
def stamp(index: int) -> None:
    """Records when the worker started it, on this machine's clock, under its arrival index."""
    started = time.time()
    broker.client.rpush(STAMPS, f"{index} {started!r}")
