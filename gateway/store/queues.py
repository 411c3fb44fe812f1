"""Queues and their endpoints in Redis.

A queue's policy is one hash field, so replacing it is a single atomic write; the claim and
finish scripts read it from there. Endpoints are one JSON value each in the queue's
``endpoints`` hash, which the claim script reads to spread work.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import cast

from pydantic import ValidationError
from redis.asyncio import Redis

from gateway.core.errors import QueueNotEmpty, QueueNotFound
from gateway.store import keys
from gateway.store.endpoint_records import (
    EndpointHealth,
    EndpointRecord,
    ListedEndpoint,
    StoredQueue,
)
from gateway.store.keys import QueueKeys
from gateway.store.scripts import Scripts
from sdk.wire import QueuePolicy


def stored_policy(raw: str | bytes) -> QueuePolicy:
    """A queue's stored policy. Fields this version does not know (a newer gateway saved them:
    a rolling upgrade, or a rollback) are left out rather than refused, so an older gateway
    keeps serving the queue by the fields it knows; the policy is validated strictly first, so
    a policy of this version's fields pays nothing more."""
    try:
        return QueuePolicy.model_validate_json(raw)
    except ValidationError:
        fields = json.loads(raw)
        if not isinstance(fields, dict):
            raise
        known = {name: value for name, value in fields.items() if name in QueuePolicy.model_fields}
        return QueuePolicy.model_validate(known)


class QueueStore:
    def __init__(self, redis: Redis, scripts: Scripts) -> None:
        self._redis = redis
        self._scripts = scripts

    async def put(self, name: str, policy: QueuePolicy, now_ms: int) -> tuple[StoredQueue, bool]:
        """Create or replace a queue's policy; returns the queue and whether it is new.

        A replaced policy can move the queue's due times (retention, stall policy): with the
        policy, the queue is made due now in its ``due`` field, then in the due index, so the
        recoverer works them out again with the new policy (a crash in between is repaired by
        its rescan; see gateway.store.tasks.due). A new queue has nothing due."""
        k = QueueKeys.of(name)
        replacing = bool(await self._redis.hexists(k.policy, "policy"))
        async with self._redis.pipeline(transaction=False) as pipe:
            if replacing:  # before the policy, so that no crash leaves it changed and not due
                pipe.hset(k.policy, "due", now_ms)
            pipe.hsetnx(k.policy, "created_ms", now_ms)
            pipe.hset(k.policy, "policy", policy.model_dump_json())
            pipe.hget(k.policy, "created_ms")
            pipe.sadd(keys.QUEUES, name)
            *_, created, _, created_ms, _ = await pipe.execute()
        if replacing:
            await self._scripts.lower_due(name, now_ms)
            await self.rebalance_keys(name, now_ms)
        return StoredQueue(name, policy, int(created_ms)), bool(created)

    async def patch(self, name: str, fields: dict[str, object], now_ms: int) -> StoredQueue:
        """Change some policy fields atomically; raises QueueNotFound. The queue is made due
        now, as by :meth:`put`."""
        k = QueueKeys.of(name)
        encoded = await self._scripts.call("patch_queue", [k.policy], [json.dumps(fields), now_ms])
        if not encoded:
            raise QueueNotFound(name)
        await self._scripts.lower_due(name, now_ms)
        if "key_concurrency" in fields:
            await self.rebalance_keys(name, now_ms)
        return await self.require(name)

    async def rebalance_keys(self, name: str, now_ms: int) -> int:
        """Move held tasks of concurrency keys that have room under the queue's policy now (a
        raised or removed ``key_concurrency``) to the ready set; returns how many moved.

        A gateway that stops between the policy's write and this leaves those tasks held until
        their key's next task ends, or the next change of the policy: none is lost."""
        k = QueueKeys.of(name)
        moved: int = await self._scripts.call(
            "key_rebalance",
            [k.policy, k.meta, k.ready, k.seq, k.key_counts],
            [now_ms, keys.WAKE_CHANNEL, name],
        )
        return moved

    async def get(self, name: str) -> StoredQueue | None:
        raw = cast(
            list[str | None],
            await self._redis.hmget(QueueKeys.of(name).policy, ["policy", "created_ms"]),
        )
        policy, created_ms = raw
        if policy is None or created_ms is None:
            return None
        return StoredQueue(name, stored_policy(policy), int(created_ms))

    async def settings(self, name: str) -> tuple[str, dict[str, str]] | None:
        """A queue's policy and endpoint records as stored, unparsed, in one round trip (None:
        no such queue): the directory parses them only when they changed."""
        k = QueueKeys.of(name)
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.hmget(k.policy, ["policy", "created_ms"])
            pipe.hgetall(k.endpoints)
            (policy, created_ms), endpoints = await pipe.execute()
        if policy is None or created_ms is None:
            return None
        return policy, endpoints

    async def policies(self, names: Sequence[str]) -> dict[str, QueuePolicy]:
        """The policies of the queues named, in one round trip (a queue gone is left out)."""
        if not names:
            return {}
        async with self._redis.pipeline(transaction=False) as pipe:
            for name in names:
                pipe.hget(QueueKeys.of(name).policy, "policy")
            raw = cast(list[str | None], await pipe.execute())
        return {
            name: stored_policy(policy)
            for name, policy in zip(names, raw, strict=True)
            if policy is not None
        }

    async def stored(self, names: Sequence[str]) -> list[StoredQueue]:
        """The queues named, in one round trip, in the order given (a queue gone is left
        out)."""
        if not names:
            return []
        async with self._redis.pipeline(transaction=False) as pipe:
            for name in names:
                pipe.hmget(QueueKeys.of(name).policy, ["policy", "created_ms"])
            raw = cast(list[list[str | None]], await pipe.execute())
        return [
            StoredQueue(name, stored_policy(policy), int(created_ms))
            for name, (policy, created_ms) in zip(names, raw, strict=True)
            if policy is not None and created_ms is not None
        ]

    async def require(self, name: str) -> StoredQueue:
        queue = await self.get(name)
        if queue is None:
            raise QueueNotFound(name)
        return queue

    async def names(self) -> list[str]:
        return sorted(cast(set[str], await self._redis.smembers(keys.QUEUES)))

    async def delete(self, name: str, *, force: bool) -> list[str]:
        """Delete a queue and its tasks; returns the ids of the deleted tasks."""
        k = QueueKeys.of(name)
        fixed = [k.policy, k.meta, k.ready, k.scheduled, k.running, k.waiting]
        rest = [key for key in k.all() if key not in fixed]
        reply = await self._scripts.call("delete_queue", fixed + rest, ["1" if force else "0"])
        if reply[0] == "NOQUEUE":
            raise QueueNotFound(name)
        if reply[0] == "BUSY":
            raise QueueNotEmpty(
                f"queue '{name}' has {reply[1]} unfinished tasks; cancel them first or "
                "delete with ?force=true"
            )
        await self._redis.srem(keys.QUEUES, name)
        await self._redis.zrem(keys.DUE, name)
        return cast(list[str], reply[1:])

    # --- endpoints ------------------------------------------------------------------------

    async def add_endpoint(self, endpoint: EndpointRecord, catalog: str | None = None) -> None:
        """Store a new endpoint and, when it reported tasks, its part of the task catalog
        (``gateway.store.catalog``), in one MULTI."""
        k = QueueKeys.of(endpoint.queue)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hset(k.endpoints, endpoint.id, endpoint.model_dump_json())
            if catalog is not None:
                pipe.hset(k.catalog, endpoint.id, catalog)
            await pipe.execute()

    async def endpoints(self, queue: str) -> list[ListedEndpoint]:
        """Every endpoint of a queue with its pushes in flight and health, oldest first."""
        k = QueueKeys.of(queue)
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.hgetall(k.endpoints)
            pipe.hgetall(k.inflight)
            pipe.hgetall(k.health)
            stored, inflight, health = await pipe.execute()
        records = [EndpointRecord.model_validate_json(raw) for raw in stored.values()]
        records.sort(key=lambda e: (e.created_ms, e.id))
        return [
            ListedEndpoint(
                e,
                int(inflight.get(e.id, 0)),
                EndpointHealth.model_validate_json(health.get(e.id) or "{}"),
            )
            for e in records
        ]

    async def rotate_secret(
        self, queue: str, endpoint_id: str, secret: str, previous_until_ms: int | None
    ) -> bool:
        """Make ``secret`` the endpoint's, keeping the current one as the previous until
        ``previous_until_ms`` (None: dropped at once); False (nothing written) when the
        endpoint is not registered."""
        rotated = await self._scripts.call(
            "rotate_secret",
            [QueueKeys.of(queue).endpoints],
            [endpoint_id, secret, previous_until_ms or 0],
        )
        return bool(rotated)

    async def set_enabled(
        self, queue: str, endpoint_id: str, enabled: bool, reason: str | None = None
    ) -> bool:
        """Enable or disable an endpoint (``reason`` says why it was disabled); False (nothing
        written) when it is not registered."""
        written = await self._scripts.call(
            "set_endpoint",
            [QueueKeys.of(queue).endpoints],
            [endpoint_id, "1" if enabled else "0", reason or ""],
        )
        return bool(written)

    async def delete_endpoint(self, queue: str, endpoint_id: str) -> bool:
        """Forget an endpoint; pushes in flight to it still finish normally."""
        k = QueueKeys.of(queue)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hdel(k.endpoints, endpoint_id)
            pipe.hdel(k.inflight, endpoint_id)
            pipe.hdel(k.health, endpoint_id)
            pipe.hdel(k.catalog, endpoint_id)
            removed, *_ = await pipe.execute()
        return bool(removed)
