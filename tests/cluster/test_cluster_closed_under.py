"""Connections of the gateway's cluster client closed under the commands using them.

When a command meets CLUSTERDOWN (a primary failed and its replica is not promoted yet), or a
pipeline meets a connection error, redis-py's cluster client closes every connection to every
node (``RedisCluster.aclose()``) to re-read the slot map, the connections other commands are
writing on included. Writing on such a connection raised errors that are not ``RedisError``
(uvloop's ``RuntimeError: unable to perform operation on <TCPTransport closed=True>``,
asyncio's ``AttributeError: 'NoneType' object has no attribute 'writelines'``), which the
gateway answered 500. The store's connections turn them into redis-py's ``ConnectionError``:
the command was never sent, redis-py retries it on the re-read map, and one that still fails is
a Redis failure the gateway answers 503 with ``Retry-After``.

Here the client's connections are closed over and over while commands and pipelines run on
every primary, as they are under load at a failover, on uvloop as in the gateway (asyncio's
own loop meets the race about fifty times less often).
"""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
import uvloop

from gateway.store.connection import connect
from gateway.store.failures import as_gateway_error

# Commands in flight per round, rounds, and closes per round (one every ``round % 8`` turns of
# the loop, so the closes meet commands at every step: connecting, writing, reading).
COMMANDS, ROUNDS, CLOSES = 400, 12, 10


async def closed_under_load(url: str) -> Counter[str]:
    """How each command went: ``ok``, ``503`` (a Redis failure the gateway answers 503), or the
    gateway's answer to its exception, the exception's type and message."""
    redis = await connect(url)
    outcomes: Counter[str] = Counter()

    async def one(i: int) -> None:
        try:
            if i % 2:
                await redis.set(f"k{i}", i)
            else:  # keys of several slots: a pipeline on several nodes
                async with redis.pipeline(transaction=False) as pipe:
                    pipe.set(f"a{i}", i)
                    pipe.get(f"b{i}")
                    await pipe.execute()
            outcomes["ok"] += 1
        except Exception as e:
            known = as_gateway_error(e)
            answer = known.status if known is not None else 500
            outcomes["503" if answer == 503 else f"{answer} {type(e).__name__}: {e}"[:90]] += 1

    try:
        for turn in range(ROUNDS):
            commands = [asyncio.create_task(one(i)) for i in range(COMMANDS)]
            for _ in range(CLOSES):
                for _ in range(turn % 8):
                    await asyncio.sleep(0)  # a turn of the loop: the commands move on
                await redis.aclose()  # as redis-py does at CLUSTERDOWN
            await asyncio.gather(*commands)
    finally:
        await redis.aclose()
    return outcomes


# 18-38 s at load 4-10: redis-py waits 0.25 s before each pipeline's retry.
@pytest.mark.timeout(180)
def test_commands_on_connections_closed_under_them_fail_only_as_redis_errors(
    cluster_url: str,
) -> None:
    outcomes = uvloop.run(closed_under_load(cluster_url))
    others = {k: n for k, n in outcomes.items() if k not in ("ok", "503")}
    assert not others, others
    assert outcomes["ok"] > 0, outcomes
