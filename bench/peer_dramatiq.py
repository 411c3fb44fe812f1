"""The Dramatiq side of ``bench/peers.py``: a no-op actor, a start-time actor, an HTTP-calling one.

Served by Dramatiq's own CLI (``dramatiq bench.peer_dramatiq --processes N``), the way its
users run it: sync actors on worker threads, the default middleware, the Redis broker on the
benchmark's Redis (``BENCH_REDIS_URL``). The benchmark process imports it too, to send.
"""

from __future__ import annotations

import os
import threading
import time

import dramatiq
import requests
from dramatiq.brokers.redis import RedisBroker

from bench.service_body import BODY, PATH

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


_local = threading.local()  # a requests.Session per worker thread (Sessions are not thread-safe)


@dramatiq.actor(queue_name=QUEUE)
def post() -> None:
    """The HTTP race's task: the same body to the user's service over a keep-alive Session."""
    session = getattr(_local, "session", None)
    if session is None:
        session = _local.session = requests.Session()
    answer = session.post(
        os.environ["BENCH_SERVICE_URL"] + PATH,
        data=BODY,
        headers={"content-type": "application/json"},
        timeout=30,
    )
    answer.raise_for_status()
