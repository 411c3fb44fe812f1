"""A primary of a Redis Cluster replaced by its replica while a gateway runs.

- A replica takes over its primary's slots (``CLUSTER FAILOVER TAKEOVER``: as when the primary
  is lost, though here it lives on and becomes a replica): the gateway follows the slots to the
  new primary and its scripts run there.
- A primary is killed (SIGKILL) under a loop of enqueues into a paused queue on it, on a cluster
  of its own with a short ``cluster-node-timeout``; the cluster promotes its replica, once the
  gateway has said 503 to an enqueue and to a readiness probe (the test holds the promotion
  until then: a failover of about two seconds fits inside redis-py's retries of one command,
  and then the gateway rightly never says 503; tests/enqueue_load.py). The gateway answers
  only 201 or 503 meanwhile, its readiness goes 503 and back to 200 by itself,
  enqueues succeed again, and once resumed the queue's acknowledged tasks that the new primary
  holds are pushed to a worker. Without WAIT (refused on a cluster), acknowledged enqueues not
  yet replicated are lost: the test records how many (``acknowledged`` and ``lost`` in its JUnit
  properties, and a printed line shown by ``pytest -rA``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from redis.cluster import RedisCluster
from redis.exceptions import RedisClusterException
from starlette.applications import Starlette
from starlette.routing import Route

from gateway.serving.redis_cluster import ManagedCluster
from gateway.store import keys
from gateway.store.keys import QueueKeys
from tests.enqueue_load import report, through_failover
from tests.scripted_worker import ADMIN, Rig, Worker
from tests.support import live_gateway, serve, until

QUEUE = "handed-over"
# Enqueues acknowledged by the new primary before the loop stops.
AFTER_FAILOVER = 20


def primary_of(ports: list[int], key: str) -> int:
    """The port of the primary serving ``key``'s slot."""
    with redis.Redis(host="127.0.0.1", port=ports[0], decode_responses=True) as node:
        slot = int(node.execute_command("CLUSTER KEYSLOT", key))
        shards = node.execute_command("CLUSTER SLOTS")
    return next(int(s[2][1]) for s in shards if s[0] <= slot <= s[1])


def replica_of_queue_primary(ports: list[int], queue: str = QUEUE) -> tuple[int, int]:
    """The ports of the primary serving ``queue``'s slot, and of its replica."""
    primary = primary_of(ports, QueueKeys.of(queue).meta)
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


def cluster_agrees(ports: list[int], primary: int, queue: str = QUEUE) -> bool:
    """Every node is in state ok and routes ``queue``'s slot to ``primary``. A node whose map
    does not yet cover every slot (the promotion has not reached it) does not agree yet."""
    for port in ports:
        try:
            with RedisCluster(host="127.0.0.1", port=port) as client:
                info = client.cluster_info(target_nodes=RedisCluster.RANDOM)
                node = client.nodes_manager.get_node_from_slot(client.keyslot(f"{{{queue}}}"))
        except RedisClusterException:
            return False
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


@pytest.fixture
def own_cluster(tmp_path: Path) -> Iterator[ManagedCluster]:
    """A cluster for one test that kills a node (the session's stays whole): three primaries,
    a replica each, and a node timeout of 1 s, so a dead primary is replaced in about 2 s."""
    with ManagedCluster(tmp_path, primaries=3, replicas=1, node_timeout_ms=1000) as cluster:
        yield cluster


def subscribed_on(port: int) -> bool:
    """The node on ``port`` has a subscriber of the gateway's wake channel."""
    with redis.Redis(host="127.0.0.1", port=port, decode_responses=True) as node:
        return bool(node.pubsub_numsub(keys.WAKE_CHANNEL)[0][1] >= 1)


def hold_promotion(replica: int, held: bool) -> None:
    """Whether the replica on port ``replica`` may replace its failed primary by itself."""
    with redis.Redis(host="127.0.0.1", port=replica) as node:
        node.config_set("cluster-replica-validity-factor", 0)
        node.config_set("cluster-replica-no-failover", "yes" if held else "no")


def queue_away_from(ports: list[int], avoided: int) -> str:
    """A queue name whose slot is served by a primary other than the one on ``avoided``."""
    return next(
        name
        for name in (f"killed-{i}" for i in range(100))
        if primary_of(ports, QueueKeys.of(name).meta) != avoided
    )


async def test_a_killed_primary_is_replaced_while_a_gateway_enqueues(
    own_cluster: ManagedCluster, record_property: Callable[[str, object], None]
) -> None:
    ports = own_cluster.ports
    worker = Worker()
    app = Starlette(routes=[Route("/", worker.handle, methods=["POST"])])
    async with serve(app) as worker_url, live_gateway(own_cluster.url, ADMIN) as (_, api):
        # Not the primary the gateway's pub/sub connection is on: losing that one is
        # test_cluster_pubsub_failover.py's case, not what this test is about.
        listening = await until(
            lambda: next((p for p in ports if subscribed_on(p)), None),
            what="the gateway's pub/sub subscription",
        )
        queue = queue_away_from(ports, listening)
        old, new = replica_of_queue_primary(ports, queue)
        # Paused: the tasks wait in the queue, to be pushed from the new primary.
        assert (await api.put(f"/v1/queues/{queue}", json={"paused": True})).status_code == 201
        endpoint = await api.post(
            f"/v1/queues/{queue}/endpoints", json={"url": worker_url + "/", "batch_size": 100}
        )
        assert endpoint.status_code == 201, endpoint.text
        worker.secret = endpoint.json()["secret"]
        # The queue's settings are on the replica before its primary dies.
        await until(lambda: replica_caught_up(old), what="the replica to catch up")
        # The replica waits to be told before it takes over (as long as need be: validity
        # factor 0), so the slot stays without a primary until the gateway has said so.
        hold_promotion(new, True)

        async def kill() -> None:
            process = own_cluster.node(old).process
            assert process is not None
            process.kill()

        async def promote() -> None:
            hold_promotion(new, False)  # the replica's own election, as when never held
            await until(lambda: is_primary(new), timeout=15, what="the replica to be promoted")

        enqueues, probes = await through_failover(
            api, queue, kill, after=AFTER_FAILOVER, within=20, replace=promote
        )

        assert not enqueues.unexpected, enqueues.unexpected  # only 201 or 503: no 500, no reset
        assert enqueues.refused, "enqueues are refused (503) while the slot has no primary"
        assert probes.seen[0] == 200, probes.seen

        with redis.Redis(host="127.0.0.1", port=new, decode_responses=True) as promoted:
            stored = promoted.hmget(QueueKeys.of(queue).meta, enqueues.acknowledged)
        lost = [i for i, s in zip(enqueues.acknowledged, stored, strict=True) if s is None]
        report("cluster", enqueues, lost, record_property)
        assert len(lost) <= len(enqueues.acknowledged) - AFTER_FAILOVER

        # What the new primary holds is dispatched from it, once the queue is resumed.
        survivors = set(enqueues.acknowledged) - set(lost)
        resumed = await api.patch(f"/v1/queues/{queue}", json={"paused": False})
        assert resumed.status_code == 200, resumed.text
        await until(
            lambda: survivors <= {push.id for _, push in worker.received},
            what="the worker to receive every acknowledged task the new primary holds",
        )
