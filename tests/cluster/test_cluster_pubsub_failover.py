"""The node a gateway's pub/sub connection is on is killed (SIGKILL), on a cluster of its own
with a 1 s ``cluster-node-timeout``, while a second gateway runs on the same cluster: the first
gateway subscribes again on a live node by itself and hears the other's enqueues again.

The observable is a pull long poll on the first gateway, waiting on an empty queue: it waits on
a wake-up alone (no re-check of its own), and the second gateway, which the task is enqueued
through, has no pull poll and does not claim for a pull endpoint, so only the first gateway's
pub/sub can hand the task to the poll.

The same with a bare Notifier whose cluster client sends nothing else: no other command tells
that client the slot map changed, so the node it names for ``jg:wake`` stays the dead one, and
the Notifier must find a live node by trying the others."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import httpx
import redis

from gateway.serving.redis_cluster import ManagedCluster
from gateway.settings import ApiKey, Settings
from gateway.store import keys
from gateway.store.connection import connect
from gateway.store.pubsub import Notifier
from tests.cluster.test_cluster_failover import (
    cluster_agrees,
    is_primary,
    own_cluster,  # noqa: F401  (the fixture)
    queue_away_from,
)
from tests.scripted_worker import ADMIN
from tests.support import gateway_app, until


def wake_subscribers(port: int) -> int:
    """Connections subscribed to ``jg:wake`` on the node on ``port``."""
    with redis.Redis(host="127.0.0.1", port=port, decode_responses=True) as node:
        return int(node.pubsub_numsub(keys.WAKE_CHANNEL)[0][1])


def role(port: int) -> list[Any]:
    with redis.Redis(host="127.0.0.1", port=port, decode_responses=True) as node:
        return list(node.execute_command("ROLE"))


def replica_of(ports: list[int], primary: int) -> int:
    return next(p for p in ports if role(p)[0] == "slave" and int(role(p)[2]) == primary)


def settings(url: str) -> Settings:
    return Settings(
        redis_url=url,
        api_keys=[ApiKey(key=ADMIN, scopes=["admin"])],
        allow_private_endpoints=True,
    )


async def test_a_gateway_hears_wake_ups_again_after_its_pub_sub_node_is_killed(
    own_cluster: ManagedCluster,  # noqa: F811
    record_property: Callable[[str, object], None],
) -> None:
    ports = own_cluster.ports
    async with gateway_app(settings(own_cluster.url), ADMIN, timeout=30) as (api, app):
        # Before the second gateway starts, the only subscriber is this gateway's connection.
        listening = await until(
            lambda: next((p for p in ports if wake_subscribers(p)), None),
            what="the first gateway's pub/sub subscription",
        )
        killed_role = role(listening)[0]
        record_property("killed_role", killed_role)
        successor = replica_of(ports, listening) if killed_role == "master" else None
        async with gateway_app(settings(own_cluster.url), ADMIN, timeout=30) as (other, _):
            queue = queue_away_from(ports, listening)
            (await api.put(f"/v1/queues/{queue}", json={})).raise_for_status()
            r = await api.post(f"/v1/queues/{queue}/endpoints", json={"pull": True})
            assert r.status_code == 201, r.text
            endpoint_id = r.json()["id"]
            assert sum(wake_subscribers(p) for p in ports) == 2

            process = own_cluster.node(listening).process
            assert process is not None
            process.kill()
            killed_at = time.monotonic()
            live = [p for p in ports if p != listening]
            if successor is not None:
                await until(lambda: is_primary(successor), timeout=15, what="the promotion")
                await until(
                    lambda: cluster_agrees(live, successor, keys.WAKE_CHANNEL),
                    timeout=15,
                    what="every live node to agree on the new map",
                )
            # Both gateways subscribed again, on live nodes, by themselves.
            await until(
                lambda: sum(wake_subscribers(p) for p in live) == 2,
                timeout=15,
                what="both gateways to subscribe again on a live node",
            )
            back_after = time.monotonic() - killed_at
            record_property("subscribed_again_after", round(back_after, 1))
            print(f"pub/sub node killed ({killed_role}): subscribed again after {back_after:.1f}s")

            poll = asyncio.create_task(lease(api, queue, endpoint_id))
            await until(lambda: app.state.pull_waiters.waiting(queue), what="the poll to wait")
            # httpx's ASGI transport honours no timeout: a hang here must fail as itself (a
            # loaded run once sat idle until the test's timeout after the subscription was back).
            created = await asyncio.wait_for(
                other.post(f"/v1/queues/{queue}/tasks", json={"name": "n"}), 30
            )
            assert created.status_code == 201, created.text
            answer = await asyncio.wait_for(poll, 10)
            assert [t["id"] for t in answer.json()["tasks"]] == [created.json()["id"]]


async def lease(api: httpx.AsyncClient, queue: str, endpoint_id: str) -> httpx.Response:
    return await api.post(
        f"/v1/queues/{queue}/leases", json={"endpoint_id": endpoint_id, "wait": 20}
    )


async def test_a_notifier_alone_finds_a_live_node_when_its_node_is_killed(
    own_cluster: ManagedCluster,  # noqa: F811
) -> None:
    ports = own_cluster.ports
    client = await connect(own_cluster.url)
    woken: list[str] = []
    notifier = Notifier(client, on_wake=lambda queue, _: woken.append(queue))
    await notifier.start()
    try:
        listening = await until(
            lambda: next((p for p in ports if wake_subscribers(p)), None),
            what="the notifier's subscription",
        )
        process = own_cluster.node(listening).process
        assert process is not None
        process.kill()
        live = [p for p in ports if p != listening]
        await until(
            lambda: sum(wake_subscribers(p) for p in live) == 1,
            timeout=15,
            what="the notifier to subscribe again on a live node",
        )
        with redis.Redis(host="127.0.0.1", port=live[0]) as node:
            node.publish(keys.WAKE_CHANNEL, "after")
        await until(lambda: woken == ["after"], what="the wake published after the kill")
    finally:
        await notifier.stop()
        await client.aclose()
