"""Events: accepted once per id, handed to every consumer, finished by the recoverer when the
accepting gateway stopped half way, kept for the retention window.

An event's record is an outbox (``gateway.store.events`` gives the order of the writes): it is
written pending before any consumer runs, and marked done with what the consumers did once
they all have. The consumers (:class:`~gateway.services.event_types.EventConsumer`: triggers
first, then waits and ``cancel_on``) are idempotent, so an event handed to them twice, by a
repeat of its ``POST`` or by the recoverer, does nothing twice; and what each reports the
second time is what the first call did.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from gateway.core.errors import EventNotFound
from gateway.core.ids import IdMaker
from gateway.services.event_types import AcceptedEvent, EventConsumer, Touched
from gateway.store.clock import Clock
from gateway.store.events import EventStore, StoredEvent, Touch
from gateway.store.records import to_datetime
from sdk.wire import Event, EventCreate, EventPage, TouchedTask

log = logging.getLogger(__name__)

LEASE_MS = 10_000
"""How long the gateway that accepted an event has to finish it before the recoverer may."""
FINISH_BATCH = 100
"""Most pending events one recoverer step claims."""
SWEEP_BATCH = 1_000
"""Most events one sweep deletes."""


def accepted(stored: StoredEvent) -> AcceptedEvent:
    return AcceptedEvent(stored.id, stored.name, stored.data, stored.accepted_ms)


def event_view(stored: StoredEvent) -> Event:
    """An event's record as the API shows it."""
    lists: dict[str, list[TouchedTask]] = {
        "started": [],
        "resumed": [],
        "cancelled": [],
        "cancel_requested": [],
    }
    for queue, task_id, what, by in stored.touched:
        lists.setdefault(what, []).append(TouchedTask(queue=queue, id=task_id, by=by))
    return Event(
        id=stored.id,
        name=stored.name,
        data=stored.data,
        accepted_ms=stored.accepted_ms,
        accepted_at=to_datetime(stored.accepted_ms),
        state="done" if stored.done else "pending",
        started=lists["started"],
        resumed=lists["resumed"],
        cancelled=lists["cancelled"],
        cancel_requested=lists["cancel_requested"],
    )


class EventService:
    """Publishing (``POST /v1/events``), reading, and the recoverer's two duties: finishing
    pending events and sweeping old ones. Also the
    :class:`~gateway.services.event_types.RecentEvents` that waits read."""

    def __init__(
        self,
        store: EventStore,
        consumers: Sequence[EventConsumer],
        clock: Clock,
        *,
        retention_ms: int,
        lease_ms: int = LEASE_MS,
        on_hold: Callable[[int], None] = lambda due_ms: None,
    ) -> None:
        self._store = store
        self._consumers = list(consumers)
        self._clock = clock
        self._retention_ms = retention_ms
        self._lease_ms = lease_ms
        self._on_hold = on_hold  # an event held until this ms: the upkeep's wake-up
        self._ids = IdMaker()

    async def publish(self, spec: EventCreate) -> tuple[Event, bool]:
        """Accept the event (or find it, by its id) and have every consumer act on it; returns
        the event and whether it is new. A known id's event is the first one: its name and
        data stand, and it is finished now if it is still pending."""
        found = None if spec.id is None else await self._store.get(spec.id)
        if found is None:
            now = self._clock.now_ms()
            event_id = spec.id or self._ids.one()
            await self._store.hold(event_id, now + self._lease_ms)
            self._on_hold(now + self._lease_ms)
            new = StoredEvent(event_id, spec.name, dict(spec.data), now)
            found = await self._store.create(new)
            if found is None:
                return event_view(await self._finish(new)), True
            if found.done:  # written by another gateway between our read and our write
                await self._store.release(event_id)
        if not found.done:
            found = await self._finish(found)
        return event_view(found), False

    async def _finish(self, stored: StoredEvent) -> StoredEvent:
        """Index the event, hand it to every consumer in order, record it done."""
        await self._store.index(stored)
        event = accepted(stored)
        touched: list[Touched] = []
        for consumer in self._consumers:
            touched += await consumer.consume(event)
        kept: tuple[Touch, ...] = tuple((t.queue, t.task_id, t.what, t.by) for t in touched)
        done = StoredEvent(
            stored.id, stored.name, stored.data, stored.accepted_ms, done=True, touched=kept
        )
        await self._store.settle(done)
        return done

    async def get(self, event_id: str) -> Event:
        found = await self._store.get(event_id)
        if found is None:
            raise EventNotFound(event_id)
        return event_view(found)

    async def page(self, name: str | None, cursor: str | None, limit: int) -> EventPage:
        """Events newest first, of one name or all; ``cursor``: the previous page's."""
        offset = int(cursor) if cursor else 0
        ids = await self._store.newest(name, offset, limit + 1)
        records = await self._store.get_many(ids[:limit])
        items = [event_view(stored) for stored in records if stored is not None]
        return EventPage(items=items, next_cursor=str(offset + limit) if len(ids) > limit else None)

    async def since(self, name: str, after_ms: int, offset: int = 0) -> list[AcceptedEvent]:
        """Events named ``name`` accepted at or after ``after_ms``, oldest first, from the
        ``offset``-th on, a page of at most ``RECENT_LIMIT`` (100): the
        :class:`~gateway.services.event_types.RecentEvents` a wait checks."""
        found = await self._store.since(name, after_ms, offset)
        return [accepted(stored) for stored in found]

    async def finish_due(self, now_ms: int) -> int:
        """Finish the pending events whose gateway stopped before it was done with them (their
        lease ran out); returns how many were finished. An entry without a record (its gateway
        stopped before writing it: no consumer ran) is dropped."""
        claimed = await self._store.claim_due(now_ms, self._lease_ms, FINISH_BATCH)
        finished = 0
        for event_id, stored in zip(claimed, await self._store.get_many(claimed), strict=True):
            if stored is None or stored.done:
                await self._store.release(event_id)
                continue
            try:
                await self._finish(stored)
            except Exception:  # left pending: claimed again when its lease runs out
                log.exception("finishing event %s failed", event_id)
                continue
            finished += 1
        return finished

    async def next_due(self) -> tuple[int | None, int | None]:
        """When the earliest pending event is due, and when the oldest event's retention ends
        (None: no such event)."""
        pending, oldest = await self._store.earliest()
        return pending, None if oldest is None else oldest + self._retention_ms

    async def sweep(self, now_ms: int) -> int:
        """Delete events accepted longer than the retention ago; returns how many."""
        old = await self._store.older_than(now_ms - self._retention_ms, SWEEP_BATCH)
        if old:
            await self._store.forget(old)
        return len(old)
