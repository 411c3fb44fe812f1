"""The gateway's pub/sub on a Redis Cluster: a message published through any node reaches the
Notifier, on its fixed channels and on the ``jg:done:<id>`` channels it subscribes to later."""

from __future__ import annotations

import asyncio

import redis

from gateway.store import keys
from gateway.store.connection import connect
from gateway.store.pubsub import Notifier
from tests.support import until


async def test_the_notifier_hears_publishes_from_every_node(
    cluster_url: str, redis_cluster: list[int]
) -> None:
    client = await connect(cluster_url)
    woken: list[str] = []
    notifier = Notifier(client, on_wake=lambda queue, _: woken.append(queue))
    await notifier.start()
    try:
        for port in redis_cluster:  # primaries and replicas alike
            with redis.Redis(host="127.0.0.1", port=port) as node:
                node.publish(keys.WAKE_CHANNEL, f"q{port}")
        expected = [f"q{port}" for port in redis_cluster]
        await until(lambda: sorted(woken) == sorted(expected), what="every wake message")

        async with notifier.watch("01ARZ3NDEKTSV4RRFFQ69G5FAV") as ended:
            await client.publish(keys.done_channel("01ARZ3NDEKTSV4RRFFQ69G5FAV"), "succeeded")
            await asyncio.wait_for(ended.wait(), 5)
    finally:
        await notifier.stop()
        await client.aclose()
