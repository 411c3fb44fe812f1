"""One cold start, run in a fresh interpreter by bench/cold_start.py (never imported by it).

``worker``: import the SDK's worker side, build a ``Worker`` with one task, run its lifespan's
startup, then hand it one signed push (made by the parent, so that signing is not timed) through
ASGI in process, and check the answer is 200 with the task's result.
``producer``: import the SDK's producer side, build a ``Client`` for the gateway at
``COLD_URL`` and enqueue one task there (``fn.using(client).delay()``), answered 201.

Prints one JSON line: seconds per step (``import``, ``build``, ``first``, and ``startup`` for
the worker's lifespan), the CPU seconds of the import and of the whole process until then
(``cpu``: interpreter start-up included, and the worker's preload of its callback client, waited
for; CPU time moves far less than wall time on a busy machine) and the number of modules
loaded. Only the standard library is imported before the
clock starts; the interpreter's own start-up is timed by the parent.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import time
from typing import Any


def worker() -> dict[str, Any]:
    t0, c0 = time.perf_counter(), time.process_time()
    from sdk import Worker, task

    t1, c1 = time.perf_counter(), time.process_time()

    @task(queue="cold", name="double")
    def double(x: int) -> int:
        return 2 * x

    app = Worker(tasks=[double], secret=os.environ["COLD_SECRET"])
    t2 = time.perf_counter()
    body = os.environ["COLD_BODY"].encode()
    headers = [(k.encode(), v.encode()) for k, v in json.loads(os.environ["COLD_HEADERS"]).items()]

    async def serve() -> tuple[float, float, int, bytes]:
        start = time.perf_counter()
        lifespan = app.lifespan()
        await lifespan.__aenter__()
        started = time.perf_counter()
        sent: list[dict[str, Any]] = []
        delivered = False

        async def receive() -> dict[str, Any]:
            nonlocal delivered
            if delivered:
                await asyncio.Event().wait()
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {"type": "http", "method": "POST", "path": "/", "headers": headers}
        await app(scope, receive, send)
        answered = time.perf_counter()
        await lifespan.__aexit__(None, None, None)
        return started - start, answered - started, sent[0]["status"], sent[1]["body"]

    startup, first, status, answer = asyncio.run(serve())
    if (status, answer) != (200, b"42"):
        raise SystemExit(f"worker answered {status} {answer!r}")
    return {
        "import": t1 - t0,
        "import cpu": c1 - c0,
        "build": t2 - t1,
        "startup": startup,
        "first": first,
    }


def producer() -> dict[str, Any]:
    t0, c0 = time.perf_counter(), time.process_time()
    from sdk import Client, task

    t1, c1 = time.perf_counter(), time.process_time()

    @task(queue="cold", name="double")
    def double(x: int) -> int:
        return 2 * x

    client = Client(os.environ["COLD_URL"], os.environ["COLD_KEY"])
    t2 = time.perf_counter()
    double.using(client).delay(21)
    t3 = time.perf_counter()
    client.close()
    return {"import": t1 - t0, "import cpu": c1 - c0, "build": t2 - t1, "first": t3 - t2}


if __name__ == "__main__":
    found = {"worker": worker, "producer": producer}[sys.argv[1]]()
    for thread in threading.enumerate():  # the worker's preload of its callback client
        if thread is not threading.main_thread():
            thread.join()
    found["cpu"] = time.process_time()
    found["modules"] = len(sys.modules)
    print(json.dumps(found))
