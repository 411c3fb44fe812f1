"""The cluster fixture itself: three primaries serving every slot, six nodes in all."""

from __future__ import annotations

from redis.cluster import RedisCluster


def test_three_primaries_serve_every_slot(redis_cluster: list[int]) -> None:
    with RedisCluster(host="127.0.0.1", port=redis_cluster[0]) as client:
        assert len(client.get_primaries()) == 3
        info = client.cluster_info(target_nodes=RedisCluster.RANDOM)
        assert info["cluster_state"] == "ok"
        assert info["cluster_slots_assigned"] == "16384"
        assert info["cluster_known_nodes"] == "6"
        assert info["cluster_size"] == "3"
