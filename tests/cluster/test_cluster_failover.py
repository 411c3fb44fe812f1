"""A replica takes over its primary's slots (``CLUSTER FAILOVER TAKEOVER``: as when the
primary is lost, though here it lives on and becomes a replica) while a gateway runs: the
gateway follows the slots to the new primary and its scripts run there."""

from __future__ import annotations

import redis
from redis.cluster import RedisCluster
from starlette.applications import Starlette
from starlette.routing import Route

from tests.scripted_worker import ADMIN, Rig, Worker
from tests.support import live_gateway, serve, until

QUEUE = "handed-over"


def replica_of_queue_primary(ports: list[int]) -> tuple[int, int]:
    """The ports of the primary serving QUEUE's slot, and of its replica."""
    with redis.Redis(host="127.0.0.1", port=ports[0], decode_responses=True) as node:
        slot = int(node.execute_command("CLUSTER KEYSLOT", f"jg:{{{QUEUE}}}:queue"))
        shards = node.execute_command("CLUSTER SLOTS")
    primary = next(int(s[2][1]) for s in shards if s[0] <= slot <= s[1])
    for port in ports:
        with redis.Redis(host="127.0.0.1", port=port, decode_responses=True) as node:
            role = node.execute_command("ROLE")
        if role[0] == "slave" and int(role[2]) == primary:
            return primary, port
    raise AssertionError(f"the primary on port {primary} has no replica")


def replica_caught_up(primary: int) -> bool:
    """The primary's replica has acknowledged everything it was sent."""
    with redis.Redis(host="127.0.0.1", port=primary, decode_responses=True) as node:
        _, offset, replicas = node.execute_command("ROLE")
    return bool(replicas) and all(int(r[2]) >= int(offset) for r in replicas)


def is_primary(port: int) -> bool:
    with redis.Redis(host="127.0.0.1", port=port, decode_responses=True) as node:
        return bool(node.execute_command("ROLE")[0] == "master")


def cluster_agrees(ports: list[int], primary: int) -> bool:
    """Every node is in state ok and routes QUEUE's slot to ``primary``."""
    for port in ports:
        with RedisCluster(host="127.0.0.1", port=port) as client:
            info = client.cluster_info(target_nodes=RedisCluster.RANDOM)
            node = client.nodes_manager.get_node_from_slot(client.keyslot(f"{{{QUEUE}}}"))
            if info["cluster_state"] != "ok" or node.port != primary:
                return False
    return True


async def test_a_gateway_keeps_working_through_a_failover(
    cluster_url: str, redis_cluster: list[int]
) -> None:
    worker = Worker()
    app = Starlette(routes=[Route("/", worker.handle, methods=["POST"])])
    async with serve(app) as worker_url, live_gateway(cluster_url, ADMIN) as (url, api):
        rig = Rig(api, worker, url)
        await rig.queue(QUEUE)
        r = await api.post(f"/v1/queues/{QUEUE}/endpoints", json={"url": worker_url + "/"})
        worker.secret = r.json()["secret"]
        before = await rig.enqueue("echo", "before", queue=QUEUE)
        assert (await rig.finished(before))["state"] == "succeeded"

        old, new = replica_of_queue_primary(redis_cluster)
        # Asynchronous replication: let the replica have the task above before it takes over.
        await until(lambda: replica_caught_up(old), what="the replica to catch up")
        with redis.Redis(host="127.0.0.1", port=new) as replica:
            replica.execute_command("CLUSTER FAILOVER", "TAKEOVER")
        await until(lambda: is_primary(new), timeout=15, what="the replica to take over")
        await until(lambda: cluster_agrees(redis_cluster, new), timeout=15, what="the new map")

        after = await rig.enqueue("echo", "after", queue=QUEUE)
        done = await rig.finished(after)
        assert (done["state"], done["result"]) == ("succeeded", {"echo": "after"})
        assert (await rig.task(before))["state"] == "succeeded"  # kept by the replica
        assert not is_primary(old)
