"""What the hot paths (enqueue, push) need to know of queues and endpoints, cached for a second.

Policies and endpoints change rarely and are read for every push; a short cache keeps them off
the hot path. A change made through this gateway drops the queue's entry at once; one made
through another gateway is seen within ``ttl`` seconds. When an entry goes stale, one refresh
runs while the other pushes keep using the stale entry (no stampede of reloads). A refresh is
one round trip, and parses nothing when what is stored did not change (every busy queue is
refreshed every ``ttl``: at 1,000 busy queues it counted; bench/RESULTS.md, "How cost grows").
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, replace

from gateway.store.endpoint_records import EndpointRecord
from gateway.store.queues import QueueStore, stored_policy
from sdk.wire import QueuePolicy

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class QueueView:
    policy: QueuePolicy
    endpoints: dict[str, EndpointRecord]
    read_at: float
    stored: tuple[str, dict[str, str]]  # the policy and endpoint records, as read


class Directory:
    def __init__(self, queues: QueueStore, ttl: float = 1.0) -> None:
        self._queues = queues
        self._ttl = ttl
        self._views: dict[str, QueueView] = {}
        self._loading: dict[str, asyncio.Future[QueueView | None]] = {}
        # Every read under way, forgotten ones too, so that close() can wait for them all.
        self._reads: set[asyncio.Future[QueueView | None]] = set()

    def forget(self, queue: str) -> None:
        """Drop what is known of the queue, including a read begun before the change."""
        self._views.pop(queue, None)
        self._loading.pop(queue, None)

    def peek(self, queue: str) -> QueueView | None:
        """The cached view, however old, without reading Redis (None when there is none):
        for metrics, which must not wait on the hot path."""
        return self._views.get(queue)

    async def view(self, queue: str, endpoint_id: str | None = None) -> QueueView | None:
        """The queue's policy and endpoints; None when the queue is gone.

        Read afresh when there is no entry or it lacks ``endpoint_id`` (a new endpoint); when
        the entry is merely old, refreshed in the background and used meanwhile.
        """
        view = self._views.get(queue)
        if view is None or (endpoint_id is not None and endpoint_id not in view.endpoints):
            return await self._load(queue)
        if time.monotonic() - view.read_at > self._ttl and queue not in self._loading:
            self._load(queue)  # starts a refresh; this call goes on with the old entry
        return view

    async def close(self) -> None:
        """Stop the reads under way (background refreshes, forgotten ones too), before Redis
        is closed: one left running would reopen a connection after the pool was closed."""
        loading = list(self._reads)
        self._loading.clear()
        for future in loading:
            future.cancel()
        await asyncio.gather(*loading, return_exceptions=True)

    def _load(self, queue: str) -> asyncio.Future[QueueView | None]:
        loading = self._loading.get(queue)
        if loading is None:
            loading = self._loading[queue] = asyncio.ensure_future(self._read(queue))
            self._reads.add(loading)
            loading.add_done_callback(self._read_done)
        return loading

    def _read_done(self, read: asyncio.Future[QueueView | None]) -> None:
        self._reads.discard(read)
        # A background refresh has no one awaiting it: its failure (Redis unreachable) is
        # logged here, not left for asyncio to report as never retrieved.
        if not read.cancelled() and (error := read.exception()) is not None:
            log.warning("reading queue settings failed: %s", error)

    async def _read(self, queue: str) -> QueueView | None:
        me = asyncio.current_task()
        try:
            stored = await self._queues.settings(queue)
            old, view = self._views.get(queue), None
            if stored is not None and old is not None and old.stored == stored:
                view = replace(old, read_at=time.monotonic())
            elif stored is not None:
                records = [EndpointRecord.model_validate_json(r) for r in stored[1].values()]
                records.sort(key=lambda e: (e.created_ms, e.id))
                endpoints = {e.id: e for e in records}
                view = QueueView(stored_policy(stored[0]), endpoints, time.monotonic(), stored)
            if self._loading.get(queue) is me:  # not forgotten meanwhile
                if view is None:
                    self._views.pop(queue, None)
                else:
                    self._views[queue] = view
            return view
        finally:
            if self._loading.get(queue) is me:
                del self._loading[queue]
