"""The HTTP API under ``/v1``, and the probes ``/healthz`` and ``/readyz``.

Imports services, telemetry, security, store and core; imported by admin, the app factory and
``gateway.cli`` (``openapi``).
"""

from __future__ import annotations

from gateway.api import (
    callbacks,
    catalog,
    events,
    health,
    jobs,
    keys,
    logs,
    metrics,
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
    *events.OPERATIONS,
    *health.OPERATIONS,
    *metrics.OPERATIONS,
    *pulls.OPERATIONS,
    *keys.OPERATIONS,
]
