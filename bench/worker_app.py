"""The benchmark's worker: an SDK Worker with a no-op task and a timestamp task.

``uvicorn bench.worker_app:app`` with ``JOBGATE_WORKER_SECRET`` set (comma-separated secrets).
``GET /done`` answers how many no-op tasks this process has run (``bench/growth.py`` waits on
it rather than polling every queue's counts); every other request goes to the Worker.
"""

from __future__ import annotations

import os
import time

from sdk import Worker, task
from sdk.asgi import Receive, Scope, Send

_done = [0]


@task(queue="bench")
async def noop() -> None:
    """Async, so the worker runs it on its event loop: a no-op needs no thread."""
    _done[0] += 1


@task(queue="bench")
async def stamp() -> float:
    """When the worker started the task, on this machine's clock. Async like the peers' stamp
    tasks: a plain function would add the hop to the worker's thread pool."""
    return time.time()


# One secret per endpoint registered for this worker, comma-separated.
worker = Worker(tasks=[noop, stamp], secret=os.environ["JOBGATE_WORKER_SECRET"].split(","))


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] == "http" and scope["method"] == "GET" and scope["path"] == "/done":
        body = str(_done[0]).encode()
        headers = [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        return
    await worker(scope, receive, send)
