"""Triggers in Redis: one hash, ``jg:triggers``, trigger id → its definition JSON.

Triggers are few and read whole (``gateway.caches.triggers`` keeps them for a second), so
one ``HGETALL`` reads them all.
"""

from __future__ import annotations

import json
from typing import Any, cast

from redis.asyncio import Redis

from gateway.store import keys
from gateway.store.records import to_datetime
from sdk.wire import Trigger


class TriggerStore:
    def __init__(self, redis: Redis) -> None:
        self._redis = redis

    async def put(self, trigger_id: str, definition: dict[str, Any]) -> None:
        await self._redis.hset(
            keys.TRIGGERS, trigger_id, json.dumps(definition, separators=(",", ":"))
        )

    async def get(self, trigger_id: str) -> dict[str, Any] | None:
        raw = cast(str | None, await self._redis.hget(keys.TRIGGERS, trigger_id))
        return None if raw is None else cast(dict[str, Any], json.loads(raw))

    async def delete(self, trigger_id: str) -> bool:
        """Whether there was such a trigger."""
        return bool(await self._redis.hdel(keys.TRIGGERS, trigger_id))

    async def all(self) -> dict[str, dict[str, Any]]:
        """Every trigger's definition, by id."""
        found = cast(dict[str, str], await self._redis.hgetall(keys.TRIGGERS))
        return {trigger_id: json.loads(raw) for trigger_id, raw in found.items()}


def trigger_view(trigger_id: str, definition: dict[str, Any]) -> Trigger:
    """A stored trigger as the API shows it."""
    return Trigger(
        id=trigger_id,
        event=definition["event"],
        queue=definition["queue"],
        task=definition["task"],
        filter=definition.get("filter") or {},
        priority=definition.get("priority", 0),
        description=definition.get("description", ""),
        created_at=to_datetime(definition["created_ms"]),
        updated_at=to_datetime(definition["updated_ms"]),
    )
