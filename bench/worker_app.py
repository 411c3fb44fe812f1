"""The benchmark's worker: an SDK Worker with a no-op task and a timestamp task.

``uvicorn bench.worker_app:app`` with ``JOBGATE_WORKER_SECRET`` set (comma-separated secrets).
"""

from __future__ import annotations

import os
import time

from sdk import Worker, task


@task(queue="bench")
async def noop() -> None:
    """Async, so the worker runs it on its event loop: a no-op needs no thread."""
    return None


@task(queue="bench")
async def stamp() -> float:
    """When the worker started the task, on this machine's clock. Async like the peers' stamp
    tasks: a plain function would add the hop to the worker's thread pool."""
    return time.time()


# One secret per endpoint registered for this worker, comma-separated.
app = Worker(tasks=[noop, stamp], secret=os.environ["JOBGATE_WORKER_SECRET"].split(","))
