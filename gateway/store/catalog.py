"""The task catalog in Redis: what each endpoint reported it serves.

Each queue's ``catalog`` hash holds one JSON value per endpoint (``{"at": ms, "tasks": [...]}``),
written whole when the endpoint is registered with tasks (together with the endpoint, in one
MULTI: ``QueueStore.add_endpoint``) or reports a new list (``put_catalog.lua``, which refuses an
endpoint that is not registered), and deleted with the endpoint or the queue. The claim script
never reads it: schemas stay off the dispatch path.
"""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio import Redis

from gateway.store.endpoint_records import EndpointRecord
from gateway.store.keys import QueueKeys
from gateway.store.scripts import Scripts


@dataclass(frozen=True, slots=True)
class StoredCatalog:
    """One read of a queue's catalog: the raw list of each endpoint that reported one, and
    every endpoint of the queue (reported or not)."""

    reported: dict[str, str]
    endpoints: dict[str, EndpointRecord]


class CatalogStore:
    def __init__(self, redis: Redis, scripts: Scripts) -> None:
        self._redis = redis
        self._scripts = scripts

    async def put(self, queue: str, endpoint_id: str, encoded: str) -> bool:
        """Replace the endpoint's list; False (nothing written) when it is not registered."""
        k = QueueKeys.of(queue)
        stored = await self._scripts.call(
            "put_catalog", [k.endpoints, k.catalog], [endpoint_id, encoded]
        )
        return bool(stored)

    async def read(self, queue: str) -> StoredCatalog:
        k = QueueKeys.of(queue)
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.hgetall(k.catalog)
            pipe.hgetall(k.endpoints)
            reported, endpoints = await pipe.execute()
        records = {
            endpoint_id: EndpointRecord.model_validate_json(raw)
            for endpoint_id, raw in endpoints.items()
        }
        return StoredCatalog(dict(reported), records)
