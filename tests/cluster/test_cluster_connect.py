"""Connecting to a Redis Cluster: every primary is checked for eviction, the clock and scripts
work through the cluster client, and every node's connections are the gateway's own."""

from __future__ import annotations

from typing import cast

import pytest
import redis
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.cluster import RedisCluster

from gateway.store.cluster import ClusterConnection
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


async def test_every_node_connects_with_the_guarded_connection(cluster_url: str) -> None:
    """The nodes the URL names and those the client learns from the slot map open
    ClusterConnection (tests/cluster/test_cluster_closed_under.py says why): redis-py's async
    cluster client takes no connection class, so the gateway sets it in the client's state."""
    client = await connect(cluster_url)
    try:
        nodes = cast(AsyncRedisCluster, client).get_nodes()
        assert len(nodes) >= 3  # the primaries at least
        for node in nodes:
            connection = node.acquire_connection()
            node.release(connection)
            assert isinstance(connection, ClusterConnection), (node, type(connection))
    finally:
        await client.aclose()
