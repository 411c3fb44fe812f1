"""The Celery side of ``bench/peers.py``: a no-op task, a start-time task, an HTTP-calling task.

Served by Celery's own CLI (``celery -A bench.peer_celery worker --concurrency N``), the way its
users run it: the prefork pool with N child processes, its default prefetch (4 per process) and
early acknowledgement, the Redis broker on the benchmark's Redis (``BENCH_REDIS_URL``), no
result backend. The benchmark process imports it too, to send.
"""

from __future__ import annotations

import os
import time

import redis
import requests
from celery import Celery

from bench.service_body import BODY, PATH

QUEUE = "bench"
STAMPS = "bench:stamps"

app = Celery("bench", broker=os.environ["BENCH_REDIS_URL"])
app.conf.update(
    task_default_queue=QUEUE,
    broker_connection_retry_on_startup=True,  # Celery 5's default, stated to keep it quiet
    worker_hijack_root_logger=False,
)
_clients: dict[str, redis.Redis | requests.Session] = {}  # per worker process, on first use


@app.task(ignore_result=True)
def noop() -> None:
    return None


@app.task(ignore_result=True)
def stamp(index: int) -> None:
    """Records when the worker started it, on this machine's clock, under its arrival index."""
    started = time.time()
    client = _clients.get("redis")
    if not isinstance(client, redis.Redis):
        client = _clients["redis"] = redis.Redis.from_url(os.environ["BENCH_REDIS_URL"])
    client.rpush(STAMPS, f"{index} {started!r}")


@app.task(ignore_result=True)
def post() -> None:
    """The HTTP race's task: the same body to the user's service, over a keep-alive Session
    (one per pool process, which runs one task at a time)."""
    session = _clients.get("http")
    if not isinstance(session, requests.Session):
        session = _clients["http"] = requests.Session()
    answer = session.post(
        os.environ["BENCH_SERVICE_URL"] + PATH,
        data=BODY,
        headers={"content-type": "application/json"},
        timeout=30,
    )
    answer.raise_for_status()
