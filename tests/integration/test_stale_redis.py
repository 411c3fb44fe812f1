"""Pooled Redis connections the server closed: opened again, and what met one sent again once.

``CLIENT KILL`` closes the pooled connections as a restart does, without the restart. Sent from
a blocking client, it returns before this test's event loop has read the connections' ends:
the command that follows is written to a connection already closed, the race that the pool's
check (which sees only what the loop has read) leaves to the retry (gateway/store/stale.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError, TimeoutError

from gateway.store.coalescing import Coalescer
from gateway.store.connection import connect
from gateway.store.scripts import Scripts
from gateway.store.stale import StaleConnection
from tests.replicated_redis import replicated_redis
from tests.support import free_port

POOLED = 8


@pytest.fixture
async def client(redis_url: str) -> AsyncIterator[Redis]:
    found = await connect(redis_url)
    yield found
    await found.aclose()


def kill_clients(redis_url: str, kind: str = "normal") -> int:
    """Close connections at the server's end, from a blocking client: the event loop does not
    run until it returns."""
    with redis.Redis.from_url(redis_url) as killer:
        killed: int = killer.client_kill_filter(_type=kind, skipme=True)
        return killed


async def command_stats(client: Redis, command: str) -> int:
    stats = await client.info("commandstats")
    return int(stats.get(f"cmdstat_{command}", {}).get("calls", 0))


async def test_the_pool_opens_again_a_connection_redis_closed_before_lending_it(
    redis_url: str,
) -> None:
    # Without the retry: this is the pool's own check, which redis-py skips when maintenance
    # notifications are on (its default with RESP3).
    client = await connect(redis_url)
    client.set_retry(Retry(NoBackoff(), 0))
    try:
        await asyncio.gather(*(client.incr("n") for _ in range(POOLED)))
        assert kill_clients(redis_url) == POOLED
        async with Redis.from_url(redis_url) as other:
            await other.ping()  # a round trip: the loop has read the connections' ends
        answers = await asyncio.gather(*(client.incr("n") for _ in range(POOLED)))
        assert sorted(answers) == list(range(POOLED + 1, 2 * POOLED + 1))
    finally:
        await client.aclose()


async def test_commands_on_pooled_connections_redis_closed_run_once_each(
    client: Redis, redis_url: str
) -> None:
    await asyncio.gather(*(client.incr("n") for _ in range(POOLED)))  # POOLED connections
    assert kill_clients(redis_url) == POOLED
    answers = await asyncio.gather(*(client.incr("n") for _ in range(POOLED)))
    assert sorted(answers) == list(range(POOLED + 1, 2 * POOLED + 1))  # each ran exactly once


async def test_a_script_on_a_connection_redis_closed_runs_once(
    client: Redis, redis_url: str
) -> None:
    scripts = Scripts(client)
    await scripts.load()
    assert await client.incr("n") == 1  # the pool's one connection
    assert kill_clients(redis_url) == 1
    # Pipelined as the enqueue does, and alone through EVALSHA.
    async with client.pipeline(transaction=False) as pipe:
        pipe.incr("n")
        pipe.incr("n")
        assert await pipe.execute() == [2, 3]
    evalsha = await command_stats(client, "evalsha")
    assert kill_clients(redis_url) == 1
    await client.evalsha(scripts.sha("lower_due"), 1, "due", "q", 5, "channel")
    assert await client.zscore("due", "q") == 5
    assert await command_stats(client, "evalsha") == evalsha + 1


async def test_the_coalescers_kept_connection_redis_closed_is_replaced(
    client: Redis, redis_url: str
) -> None:
    coalescer = Coalescer(client)
    assert await coalescer.run([("INCR", "n")]) == [1]  # its connection is kept for the next
    assert kill_clients(redis_url) == 1
    assert await coalescer.run([("INCR", "n"), ("INCR", "n")]) == [2, 3]


async def test_a_pub_sub_connection_redis_closed_is_left_to_its_reader(
    client: Redis, redis_url: str
) -> None:
    # Sent again, a PING would reconnect and subscribe again unseen, and the messages published
    # meanwhile would be lost without the notifier's wake-up of everything (its on_reconnect).
    pubsub = client.pubsub()
    await pubsub.subscribe("channel")
    assert (await pubsub.get_message(timeout=5) or {}).get("type") == "subscribe"
    assert kill_clients(redis_url, "pubsub") == 1
    await pubsub.ping()
    with pytest.raises(ConnectionError) as raised:
        await pubsub.get_message(timeout=5)
    assert not isinstance(raised.value, StaleConnection)
    await pubsub.aclose()  # type: ignore[no-untyped-call]


async def test_a_connection_opened_for_the_command_is_not_tried_again() -> None:
    with pytest.raises(ConnectionError) as raised:  # refused: Redis's state now
        await connect(f"redis://127.0.0.1:{free_port()}/0")
    assert not isinstance(raised.value, StaleConnection)


async def test_a_command_that_timed_out_is_not_sent_again(redis_url: str) -> None:
    client = await connect(redis_url, timeout=0.2)
    try:
        await client.ping()
        blpops = await command_stats(client, "blpop")
        with pytest.raises(TimeoutError):
            await client.blpop(["nothing"], timeout=5)  # may be under way at Redis: not again
        assert await command_stats(client, "blpop") == blpops + 1
    finally:
        await client.aclose()


async def test_through_sentinel_too(tmp_path: Path) -> None:
    with replicated_redis(tmp_path, replicas=0, sentinels=1) as group:
        client = await connect(group.url)
        try:
            await asyncio.gather(*(client.incr("n") for _ in range(POOLED)))
            # Also the Sentinel's own connection to the primary (it connects again).
            assert kill_clients(group.primary.url) >= POOLED
            answers = await asyncio.gather(*(client.incr("n") for _ in range(POOLED)))
            assert sorted(answers) == list(range(POOLED + 1, 2 * POOLED + 1))
        finally:
            await client.aclose()
