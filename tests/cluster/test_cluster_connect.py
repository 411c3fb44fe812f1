"""Connecting to a Redis Cluster: every primary is checked for eviction, and the clock and
scripts work through the cluster client."""

from __future__ import annotations

import pytest
import redis
from redis.cluster import RedisCluster

from gateway.store.connection import UnsafeRedis, connect, server_time_ms
from gateway.store.scripts import Scripts


async def test_a_primary_that_evicts_keys_is_refused(
    cluster_url: str, redis_cluster: list[int]
) -> None:
    with RedisCluster(host="127.0.0.1", port=redis_cluster[0]) as client:
        last = client.get_primaries()[-1]
    with redis.Redis(host=last.host, port=last.port) as node:
        node.config_set("maxmemory-policy", "allkeys-lru")
        try:
            with pytest.raises(UnsafeRedis, match="allkeys-lru"):
                await connect(cluster_url)
        finally:
            node.config_set("maxmemory-policy", "noeviction")


async def test_clock_and_scripts_answer_through_the_cluster_client(cluster_url: str) -> None:
    client = await connect(cluster_url)
    try:
        assert await server_time_ms(client) > 1.7e12
        scripts = Scripts(client)
        await scripts.load()
        assert await scripts.ensure_loaded() == 0
    finally:
        await client.aclose()
