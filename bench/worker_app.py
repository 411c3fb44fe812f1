"""The benchmark's worker: an SDK Worker with a no-op task and a timestamp task.

``uvicorn bench.worker_app:app`` with ``JOBGATE_WORKER_SECRET`` set.
"""

from __future__ import annotations

import os
import time

from sdk import Worker, task


@task(queue="bench")
def noop() -> None:
    return None


@task(queue="bench")
def stamp() -> float:
    """When the worker started the task, on this machine's clock."""
    return time.time()


app = Worker(tasks=[noop, stamp], secret=os.environ["JOBGATE_WORKER_SECRET"])
