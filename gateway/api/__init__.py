"""The HTTP API under ``/v1``."""

from __future__ import annotations

from gateway.api import (
    callbacks,
    catalog,
    jobs,
    logs,
    notices,
    operations,
    pulls,
    queues,
    tasks,
)
from gateway.api.routing import Operation

OPERATIONS: list[Operation] = [
    *queues.OPERATIONS,
    *tasks.OPERATIONS,
    *logs.OPERATIONS,
    *callbacks.OPERATIONS,
    *operations.OPERATIONS,
    *catalog.OPERATIONS,
    *notices.OPERATIONS,
    *jobs.OPERATIONS,
    *pulls.OPERATIONS,
]
