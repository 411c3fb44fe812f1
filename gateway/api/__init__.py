"""The HTTP API under ``/v1``."""

from __future__ import annotations

from gateway.api import callbacks, jobs, operations, queues, tasks
from gateway.api.routing import Operation

OPERATIONS: list[Operation] = [
    *queues.OPERATIONS,
    *tasks.OPERATIONS,
    *callbacks.OPERATIONS,
    *operations.OPERATIONS,
    *jobs.OPERATIONS,
]
