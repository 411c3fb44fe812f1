"""What every part of the task store shares: the Redis client and the loaded scripts."""

from __future__ import annotations

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from gateway.store.coalescing import Coalescer
from gateway.store.replication import NO_WAIT, Durability
from gateway.store.scripts import Scripts


class StoreBase:
    """The Redis client (decoding responses), the scripts every task state change calls, how
    many replicas must confirm an enqueue, the round trips enqueues share (a single Redis or
    Sentinel; a cluster routes each command by its key, through redis-py), and this gateway's
    name in the wake messages of its enqueues (``origin``; :class:`gateway.store.pubsub.Notifier`
    tells its own apart). Finishes that carry a claim share round trips too, without waiting
    for replicas (``_sharing``): a finish never did."""

    def __init__(
        self,
        redis: Redis,
        scripts: Scripts,
        *,
        durability: Durability = NO_WAIT,
        origin: str = "",
    ) -> None:
        self._redis = redis
        self._scripts = scripts
        self._durability = durability
        cluster = isinstance(redis, RedisCluster)
        self._coalescer = None if cluster else Coalescer(redis, durability)
        self._sharing = None if cluster else Coalescer(redis)
        self._origin = origin
