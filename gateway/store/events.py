"""Events in Redis: each record a key of its own, indexed by time and by name, and the pending
index that makes a record an outbox the recoverer finishes.

Every key here is global (no queue's hash tag) and every write one command of its own, so an
event is kept the same way on one Redis and on a Cluster (``gateway.store.keys``, "Events and
triggers"). The order of the writes is what makes a gateway's death harmless:

1. ``jg:events:pending`` gets the id, due a lease from now (:meth:`EventStore.hold`);
2. the record is written with ``SET NX`` (:meth:`EventStore.create`): the first writer of an id
   owns it, and the accepted ms in it is the one every later reader uses;
3. the id goes into ``jg:events`` and ``jg:events:n:<name>`` (:meth:`EventStore.index`), before
   any consumer runs, so a wait recorded after this sees the event (:meth:`EventStore.since`);
4. the consumers act; the record is rewritten ``done`` with what they did
   (:meth:`EventStore.settle`), and the pending entry removed.

A gateway that stops after 1 leaves a pending entry that the recoverer claims when due
(:meth:`EventStore.claim_due`) and finishes from the record, or drops when there is none.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from pydantic import JsonValue
from redis.asyncio import Redis

from gateway.store import keys
from gateway.store.scripts import Scripts

RECENT_LIMIT = 100
"""Most events one :meth:`EventStore.since` read returns (the oldest first): the lookback of a
wait considers this many events of its name (docs/durable.md, "Waiting for an event")."""


Touch = tuple[str, str, str, str]
"""What an event did to one task, as kept: queue, task id, what (started, resumed, cancelled,
cancel_requested) and by (the trigger, the wait's step, ``cancel_on``)."""


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """An event's record: the event, whether it is done, and what it did."""

    id: str
    name: str
    data: dict[str, JsonValue]
    accepted_ms: int
    done: bool = False
    touched: tuple[Touch, ...] = field(default=())


def _encode(stored: StoredEvent) -> str:
    return json.dumps(
        {
            "name": stored.name,
            "data": stored.data,
            "ms": stored.accepted_ms,
            "state": "done" if stored.done else "pending",
            "touched": [list(t) for t in stored.touched],
        },
        separators=(",", ":"),
    )


def _decode(event_id: str, raw: str) -> StoredEvent:
    record: dict[str, Any] = json.loads(raw)
    return StoredEvent(
        event_id,
        record["name"],
        record.get("data") or {},
        int(record["ms"]),
        done=record.get("state") == "done",
        touched=tuple((str(q), str(i), str(w), str(b)) for q, i, w, b in record.get("touched", ())),
    )


class EventStore:
    """The events' keys (the services make them the accepted events that consumers and waits
    read: ``gateway.services.events``)."""

    def __init__(self, redis: Redis, scripts: Scripts) -> None:
        self._redis = redis
        self._scripts = scripts

    async def hold(self, event_id: str, until_ms: int) -> None:
        """Put the event in the pending index, due at ``until_ms`` (step 1)."""
        await self._redis.zadd(keys.EVENTS_PENDING, {event_id: until_ms})

    async def create(self, event: StoredEvent) -> StoredEvent | None:
        """Write the event's record unless its id has one (step 2); returns the record found
        instead, or None when this call wrote it. A record that vanished between the two
        commands (swept) is written again."""
        raw = _encode(event)
        for _ in range(2):
            if await self._redis.set(keys.event(event.id), raw, nx=True):
                return None
            found = await self.get(event.id)
            if found is not None:
                return found
        raise RuntimeError(f"event {event.id!r} could not be written nor read")

    async def index(self, event: StoredEvent) -> None:
        """Add the event to the listing and its name's index (step 3; idempotent)."""
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.zadd(keys.EVENTS, {event.id: event.accepted_ms})
            pipe.zadd(keys.events_named(event.name), {event.id: event.accepted_ms})
            await pipe.execute()

    async def settle(self, event: StoredEvent) -> None:
        """Record the event done with what it did (``event``, done), then take it out of the
        pending index (step 4). A record swept meanwhile is not written again."""
        await self._redis.set(keys.event(event.id), _encode(event), xx=True)
        await self.release(event.id)

    async def release(self, event_id: str) -> None:
        """Take the event out of the pending index."""
        await self._redis.zrem(keys.EVENTS_PENDING, event_id)

    async def claim_due(self, now_ms: int, lease_ms: int, limit: int) -> list[str]:
        """The pending events due at ``now_ms`` (at most ``limit``), each now due a lease
        later, so that other gateways leave them to this one meanwhile."""
        claimed = await self._scripts.call(
            "claim_events", [keys.EVENTS_PENDING], [now_ms, lease_ms, limit]
        )
        return [str(event_id) for event_id in claimed]

    async def get(self, event_id: str) -> StoredEvent | None:
        raw = cast(str | None, await self._redis.get(keys.event(event_id)))
        return None if raw is None else _decode(event_id, raw)

    async def get_many(self, event_ids: Sequence[str]) -> list[StoredEvent | None]:
        """Each event's record (None when gone): one GET each in one round trip (the records
        lie in several Cluster slots)."""
        if not event_ids:
            return []
        async with self._redis.pipeline(transaction=False) as pipe:
            for event_id in event_ids:
                pipe.get(keys.event(event_id))
            found = cast(list[str | None], await pipe.execute())
        return [
            None if raw is None else _decode(event_id, raw)
            for event_id, raw in zip(event_ids, found, strict=True)
        ]

    async def newest(self, name: str | None, offset: int, count: int) -> list[str]:
        """Event ids newest first, of one name or of all, from ``offset``."""
        index = keys.EVENTS if name is None else keys.events_named(name)
        found = await self._redis.zrevrange(index, offset, offset + count - 1)
        return [str(event_id) for event_id in found]

    async def since(self, name: str, after_ms: int, offset: int = 0) -> list[StoredEvent]:
        """Events named ``name`` accepted at or after ``after_ms``, oldest first, from the
        ``offset``-th on; at most :data:`RECENT_LIMIT`. Events whose record is gone (swept) are
        left out."""
        ids = await self._redis.zrangebyscore(
            keys.events_named(name), after_ms, "+inf", start=offset, num=RECENT_LIMIT
        )
        stored = await self.get_many([str(event_id) for event_id in ids])
        return [s for s in stored if s is not None]

    async def earliest(self) -> tuple[int | None, int | None]:
        """The earliest pending entry's due ms and the oldest event's accepted ms (None when
        there is none), in one round trip."""
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.zrange(keys.EVENTS_PENDING, 0, 0, withscores=True)
            pipe.zrange(keys.EVENTS, 0, 0, withscores=True)
            pending, oldest = await pipe.execute()
        return (
            int(pending[0][1]) if pending else None,
            int(oldest[0][1]) if oldest else None,
        )

    async def older_than(self, cutoff_ms: int, limit: int) -> list[str]:
        """Ids of events accepted before ``cutoff_ms``, oldest first (the retention sweep)."""
        found = await self._redis.zrangebyscore(
            keys.EVENTS, "-inf", f"({cutoff_ms}", start=0, num=limit
        )
        return [str(event_id) for event_id in found]

    async def forget(self, event_ids: Sequence[str]) -> None:
        """Delete events: out of their name's index first, then the record, then out of the
        listing and the pending index, so a sweep that stops half way is finished by the next
        (an id left in the listing without a record is dropped then)."""
        stored = await self.get_many(event_ids)
        async with self._redis.pipeline(transaction=False) as pipe:
            for found in stored:
                if found is not None:
                    pipe.zrem(keys.events_named(found.name), found.id)
            await pipe.execute()
        async with self._redis.pipeline(transaction=False) as pipe:
            for event_id in event_ids:
                pipe.delete(keys.event(event_id))
            await pipe.execute()
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.zrem(keys.EVENTS, *event_ids)
            pipe.zrem(keys.EVENTS_PENDING, *event_ids)
            await pipe.execute()
