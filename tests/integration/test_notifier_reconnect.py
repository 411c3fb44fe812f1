"""The Notifier's pub/sub connection killed by Redis (``CLIENT KILL TYPE pubsub``): it subscribes
again by itself, on its fixed channels and on the ``jg:done:<id>`` channel watched meanwhile,
and calls ``on_reconnect`` once."""

from __future__ import annotations

import asyncio

from redis.asyncio import Redis

from gateway.store import keys
from gateway.store.pubsub import Notifier
from tests.support import until

TASK = "01ARZ3NDEKTSV4RRFFQ69G5FAV"


async def test_a_killed_pubsub_connection_subscribes_again(redis_url: str) -> None:
    async with Redis.from_url(redis_url, decode_responses=True) as redis:
        woken: list[str] = []
        reconnects: list[None] = []
        notifier = Notifier(
            redis,
            on_wake=lambda queue, _: woken.append(queue),
            on_reconnect=lambda: reconnects.append(None),
        )
        await notifier.start()
        try:
            async with notifier.watch(TASK) as ended:
                assert await redis.client_kill_filter(_type="pubsub") == 1

                async def subscribed_again() -> bool:
                    found = dict(await redis.pubsub_numsub(keys.WAKE_CHANNEL))
                    return bool(reconnects) and found[keys.WAKE_CHANNEL] == 1

                await until(subscribed_again, what="the notifier to subscribe again")
                await redis.publish(keys.WAKE_CHANNEL, "mail")
                await until(lambda: woken == ["mail"], what="the wake after the reconnect")
                await redis.publish(keys.done_channel(TASK), "succeeded")
                await asyncio.wait_for(ended.wait(), 5)
            assert reconnects == [None]
        finally:
            await notifier.stop()
