"""A real Redis Cluster on loopback: three primaries and three replicas, started once per
session (``redis-server --cluster-enabled yes`` each in its own directory, then
``redis-cli --cluster create``) and stopped afterwards. Each test that asks for
``cluster_url`` gets it flushed on every primary.

Needs ``redis-server`` and ``redis-cli`` only; when either is missing the tests FAIL (not
skip), as the Makefile requires both.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest
from redis.cluster import RedisCluster

from gateway.serving.redis_cluster import ManagedCluster


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[int]]:
    """The session's Redis Cluster; yields the ports of its six nodes."""
    if shutil.which("redis-cli") is None or shutil.which("redis-server") is None:
        pytest.fail("the cluster tests need redis-server and redis-cli: run 'make redis-server'")
    with ManagedCluster(tmp_path_factory.mktemp("cluster"), primaries=3, replicas=1) as cluster:
        yield cluster.ports


@pytest.fixture
def cluster_url(redis_cluster: list[int]) -> str:
    """The gateway URL of the session's cluster, every primary flushed for this test."""
    with RedisCluster(host="127.0.0.1", port=redis_cluster[0]) as client:
        client.flushall(target_nodes=RedisCluster.PRIMARIES)
    return "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in redis_cluster[:3]) + "/"
