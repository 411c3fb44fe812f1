"""Pooled Redis connections the server closed: opened again before they are used.

``CLIENT KILL`` closes the pooled connections as a restart does, without the restart
(gateway/store/stale.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from gateway.store.connection import connect

POOLED = 8


@pytest.fixture
async def client(redis_url: str) -> AsyncIterator[Redis]:
    found = await connect(redis_url)
    yield found
    await found.aclose()


def kill_clients(redis_url: str, **where: Any) -> int:
    """Close connections at the server's end, from a blocking client: the event loop does not
    run until it returns."""
    with redis.Redis.from_url(redis_url) as killer:
        killed: int = killer.client_kill_filter(_type="normal", skipme=True, **where)
        return killed


async def command_stats(client: Redis, command: str) -> int:
    stats = await client.info("commandstats")
    return int(stats.get(f"cmdstat_{command}", {}).get("calls", 0))


async def test_the_pool_opens_again_a_connection_redis_closed_before_lending_it(
    redis_url: str,
) -> None:
    # Without the retry: this is the pool's own check, which redis-py skips when maintenance
    # notifications are on (its default with RESP3).
    client = await connect(redis_url)
    client.set_retry(Retry(NoBackoff(), 0))
    try:
        await asyncio.gather(*(client.incr("n") for _ in range(POOLED)))
        assert kill_clients(redis_url) == POOLED
        async with Redis.from_url(redis_url) as other:
            await other.ping()  # a round trip: the loop has read the connections' ends
        answers = await asyncio.gather(*(client.incr("n") for _ in range(POOLED)))
        assert sorted(answers) == list(range(POOLED + 1, 2 * POOLED + 1))
    finally:
        await client.aclose()
