"""Fixtures for tests of the Redis store: a real Redis, its scripts, and a manual clock."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from redis.asyncio import Redis

from gateway.store.clock import ManualClock
from gateway.store.queues import QueueStore
from gateway.store.scripts import Scripts
from gateway.store.tasks import TaskStore


@dataclass
class Stores:
    redis: Redis
    tasks: TaskStore
    queues: QueueStore
    clock: ManualClock


@pytest.fixture
async def stores(redis_url: str) -> AsyncIterator[Stores]:
    redis = Redis.from_url(redis_url, decode_responses=True)
    scripts = Scripts(redis)
    await scripts.load()
    yield Stores(redis, TaskStore(redis, scripts), QueueStore(redis, scripts), ManualClock())
    await redis.aclose()
