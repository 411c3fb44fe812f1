"""``redis+cluster://`` URLs: which nodes they name, and the mistakes refused up front."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gateway.settings import Settings
from gateway.store.cluster import BadClusterUrl, is_cluster_url, startup_nodes


def test_cluster_schemes_are_told_from_single_redis_ones() -> None:
    assert is_cluster_url("redis+cluster://10.0.0.1:7000/")
    assert is_cluster_url("REDISS+CLUSTER://10.0.0.1:7000")
    assert not is_cluster_url("redis://127.0.0.1:6379/0")
    assert not is_cluster_url("rediss://127.0.0.1:6379/0")


def test_every_node_of_the_url_is_a_startup_node() -> None:
    url = "redis+cluster://user:p%40ss@10.0.0.1:7000,redis-b:7001,[::1]:7002/"
    assert startup_nodes(url) == [("10.0.0.1", 7000), ("redis-b", 7001), ("::1", 7002)]
    assert startup_nodes("rediss+cluster://a:1") == [("a", 1)]


@pytest.mark.parametrize(
    "url",
    [
        "redis+cluster:///",
        "redis+cluster://10.0.0.1/",
        "redis+cluster://10.0.0.1:7000,10.0.0.2/",
        "redis+cluster://10.0.0.1:port/",
        "redis+cluster://10.0.0.1:7000/1",
    ],
)
def test_a_url_without_usable_nodes_or_with_a_database_is_refused(url: str) -> None:
    with pytest.raises(BadClusterUrl):
        startup_nodes(url)


def test_wait_replicas_is_refused_with_a_cluster_url() -> None:
    with pytest.raises(ValidationError, match="wait_replicas is not supported"):
        Settings(redis_url="redis+cluster://127.0.0.1:7000", wait_replicas=1)
    assert Settings(redis_url="redis+cluster://127.0.0.1:7000").wait_replicas == 0
