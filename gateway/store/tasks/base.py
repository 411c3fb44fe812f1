"""What every part of the task store shares: the Redis client and the loaded scripts."""

from __future__ import annotations

from redis.asyncio import Redis

from gateway.store.scripts import Scripts


class StoreBase:
    """The Redis client (decoding responses) and the scripts every task state change calls."""

    def __init__(self, redis: Redis, scripts: Scripts) -> None:
        self._redis = redis
        self._scripts = scripts
