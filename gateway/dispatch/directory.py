"""What the dispatcher needs to know of queues and endpoints, cached for a second.

Policies and endpoints change rarely and are read for every push; a short cache keeps them off
the hot path. A change made through this gateway drops the queue's entry at once; one made
through another gateway is seen within ``ttl`` seconds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from gateway.store.queues import QueueStore
from gateway.store.records import EndpointRecord
from sdk.wire import QueuePolicy


@dataclass(frozen=True, slots=True)
class QueueView:
    policy: QueuePolicy
    endpoints: dict[str, EndpointRecord]
    read_at: float


class Directory:
    def __init__(self, queues: QueueStore, ttl: float = 1.0) -> None:
        self._queues = queues
        self._ttl = ttl
        self._views: dict[str, QueueView] = {}

    def forget(self, queue: str) -> None:
        self._views.pop(queue, None)

    async def view(self, queue: str, endpoint_id: str | None = None) -> QueueView | None:
        """The queue's policy and endpoints; re-read when stale or missing ``endpoint_id``."""
        view = self._views.get(queue)
        now = time.monotonic()
        if (
            view is None
            or now - view.read_at > self._ttl
            or (endpoint_id is not None and endpoint_id not in view.endpoints)
        ):
            stored = await self._queues.get(queue)
            if stored is None:
                self.forget(queue)
                return None
            endpoints = {e.id: e for e, _ in await self._queues.endpoints(queue)}
            view = self._views[queue] = QueueView(stored.policy, endpoints, now)
        return view
