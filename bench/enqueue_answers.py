"""The enqueue's answer, idle: how long a producer's enqueue call takes to return, beside
enqueue to start, for each way a producer enqueues into Jobgate.

A stamp task (``bench.e2e.STAMP``: it returns the worker's ``time.time()`` when it starts) is
sent ``samples`` times at ``rate`` per second (``bench.peers_session.paced``, an open loop)
through one of the senders below; each call's clock readings are taken just before it and just
after it returned, as the peers' are around ``kiq()`` / ``send()`` / ``delay()``
(``bench/peers_python.py``). The start times are read back afterwards through an
``AsyncClient``. The senders:

- ``enqueue_sender``: ``AsyncClient.enqueue`` (the whole Task answered), what the latency runs
  have always sent;
- ``delay_sender``: a ``@task`` function's ``.delay()`` on the blocking ``Client`` (a receipt
  answered: ``Prefer: return=minimal``), what the issue's probe timed;
- ``PlainPost``: one ``POST /v1/queues/bench/tasks`` on a kept-alive ``http.client``
  connection, no SDK (the whole Task answered).

The blocking senders block the event loop while they wait, as Dramatiq's and Celery's
synchronous sends do in the race: at 50 arrivals/s each call is long done before the next.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import time
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from bench.e2e import KEY, STAMP
from bench.peers_session import latency_ms, paced
from sdk import AsyncClient, Client, task

QUEUE = "bench"
READS = 16  # concurrent result reads after a run

Send = Callable[[int], Awaitable[str]]  # arrival index -> the task's id


async def timed(
    send: Send, samples: int, rate: float, reader: AsyncClient
) -> tuple[list[float], list[float]]:
    """Enqueue to start and the enqueue call's own duration (ms), one each per stamp task."""
    sent: dict[int, float] = {}
    answered: dict[int, float] = {}
    ids: dict[int, str] = {}

    async def one(index: int) -> None:
        sent[index] = time.time()
        ids[index] = await send(index)
        answered[index] = time.time()

    await paced(samples, rate, one)
    started: dict[int, float] = {}
    gate = asyncio.Semaphore(READS)

    async def read(index: int) -> None:
        async with gate:
            result = (await reader.wait(ids[index], timeout=60)).result
        assert isinstance(result, float), result
        started[index] = result

    await asyncio.gather(*(read(i) for i in ids))
    return latency_ms(sent, started), latency_ms(sent, answered)


def enqueue_sender(clients: list[AsyncClient]) -> Send:
    """``AsyncClient.enqueue``, the clients taken in turn (one per gateway)."""

    async def send(index: int) -> str:
        return (await clients[index % len(clients)].enqueue(QUEUE, STAMP)).id

    return send


def delay_sender(client: Client) -> Send:
    """The stamp task's ``.delay()`` through ``client`` (blocking)."""

    @task(QUEUE, name=STAMP, client=client)
    async def stamp() -> float:
        raise AssertionError("run by the bench worker, never here")

    async def send(index: int) -> str:
        return stamp.delay().id

    return send


def ways(reader: AsyncClient, client: Client, plain: PlainPost) -> dict[str, Send]:
    """Every way in, by name: the async client's enqueue, ``.delay()``, a plain POST."""
    return {
        "AsyncClient.enqueue": enqueue_sender([reader]),
        ".delay()": delay_sender(client),
        "plain POST": plain.send,
    }


class PlainPost:
    """One kept-alive HTTP/1.1 connection POSTing the stamp task, no SDK (blocking)."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        assert parts.hostname is not None, url
        self._connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
        self._body = json.dumps({"name": STAMP}).encode()
        self._headers = {"authorization": f"Bearer {KEY}", "content-type": "application/json"}

    async def send(self, index: int) -> str:
        self._connection.request("POST", f"/v1/queues/{QUEUE}/tasks", self._body, self._headers)
        answer = self._connection.getresponse()
        body = answer.read()
        assert answer.status == 201, body
        task_id = json.loads(body)["id"]
        assert isinstance(task_id, str), body
        return task_id

    def close(self) -> None:
        self._connection.close()
