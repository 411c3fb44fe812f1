"""Triggers as the events path reads them: every trigger, grouped by event name, cached for a
second.

Every accepted event asks which triggers its name has; triggers change rarely, so one
``HGETALL`` a second serves every event. A change made through this gateway drops the cache at
once; one made through another gateway is seen within ``ttl`` seconds. A stale cache is read
again before it is used (one read at a time; the events arriving meanwhile wait for it), so an
event never starts tasks for a trigger deleted more than ``ttl`` seconds before.
"""

from __future__ import annotations

import asyncio
import time

from gateway.store.triggers import TriggerStore, trigger_view
from sdk.wire import Trigger


class TriggerCache:
    def __init__(self, store: TriggerStore, ttl: float = 1.0) -> None:
        self._store = store
        self._ttl = ttl
        self._by_event: dict[str, list[Trigger]] = {}
        self._read_at: float | None = None
        self._lock = asyncio.Lock()
        self._changes = 0  # forget() calls: a read begun before one is not fresh

    def forget(self) -> None:
        """A trigger changed through this gateway: read them all again at the next event."""
        self._read_at = None
        self._changes += 1

    async def for_event(self, name: str) -> list[Trigger]:
        """The triggers of event ``name``, ordered by id."""
        if self._stale():
            async with self._lock:
                if self._stale():  # not read by the event that held the lock before
                    await self._read()
        return self._by_event.get(name, [])

    def _stale(self) -> bool:
        return self._read_at is None or time.monotonic() - self._read_at > self._ttl

    async def _read(self) -> None:
        started, changes = time.monotonic(), self._changes
        by_event: dict[str, list[Trigger]] = {}
        for trigger_id, definition in sorted((await self._store.all()).items()):
            trigger = trigger_view(trigger_id, definition)
            by_event.setdefault(trigger.event, []).append(trigger)
        self._by_event = by_event
        self._read_at = started if changes == self._changes else None
