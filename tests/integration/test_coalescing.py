"""Enqueues of the same moment share a round trip (gateway/store/coalescing.py), on a real Redis."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from redis.asyncio import BlockingConnectionPool, Connection, Redis
from redis.exceptions import ConnectionError, NoScriptError, TimeoutError
from ulid import ULID

from gateway.store.coalescing import Coalescer, Command
from gateway.store.keys import QueueKeys
from gateway.store.records import NewTask
from gateway.store.replication import Durability
from gateway.store.tasks import Stored
from sdk.wire import QueuePolicy, TaskState

from .conftest import Stores


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[Redis]:
    client = Redis.from_pool(
        BlockingConnectionPool.from_url(redis_url, decode_responses=True, max_connections=64)
    )
    yield client
    await client.aclose()


def connections(redis: Redis) -> int:
    pool = redis.connection_pool
    return len(pool._available_connections) + len(pool._in_use_connections)  # type: ignore[attr-defined]


async def test_callers_of_one_moment_share_one_connection_and_get_their_own_replies(
    redis: Redis,
) -> None:
    coalescer = Coalescer(redis)
    replies = await asyncio.gather(
        *(coalescer.run([("SET", f"k{i}", i), ("INCRBY", f"k{i}", i)]) for i in range(50))
    )
    assert replies == [["OK", 2 * i] for i in range(50)]
    assert connections(redis) == 1
    # A caller alone goes alone, at once, on the same connection.
    assert await coalescer.run([("GET", "k7")]) == ["14"]
    assert connections(redis) == 1


async def test_a_lone_callers_write_goes_one_turn_of_the_loop_after_its_call(
    redis: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The write's task is made by the first caller, not by a callback a turn later (which put
    the write two turns behind the call: bench/HISTORY.md, "Enqueue to start, round 2")."""
    coalescer = Coalescer(redis)
    assert await coalescer.run([("PING",)]) == ["PONG"]  # the connection is made
    sent: list[bytes] = []
    send = Connection.send_packed_command

    async def recorded(self: Connection, command: bytes, check_health: bool = True) -> None:
        sent.append(command)
        await send(self, command, check_health)

    monkeypatch.setattr(Connection, "send_packed_command", recorded)
    caller = asyncio.ensure_future(coalescer.run([("ECHO", "one")]))
    await asyncio.sleep(0)  # the caller runs: the write's task is made
    assert sent == []  # callers of this turn may still join
    await asyncio.sleep(0)  # the write's task runs
    assert sent == [b"*2\r\n$4\r\nECHO\r\n$3\r\none\r\n"]
    assert await caller == ["one"]


async def test_an_error_reply_is_that_callers_reply_only(redis: Redis) -> None:
    coalescer = Coalescer(redis)
    good, bad = await asyncio.gather(
        coalescer.run([("SET", "a", 1), ("GET", "a")]),
        coalescer.run([("EVALSHA", "0" * 40, 0), ("GET", "a")]),
    )
    assert good == ["OK", "1"]
    assert isinstance(bad[0], NoScriptError)
    assert bad[1] == "1"


async def test_a_cancelled_caller_leaves_the_connection_in_step(redis: Redis) -> None:
    coalescer = Coalescer(redis)
    first = asyncio.ensure_future(coalescer.run([("SET", "x", "first")]))
    second = asyncio.ensure_future(coalescer.run([("GET", "x")]))
    await asyncio.sleep(0)  # both are waiting for the shared write
    first.cancel()
    assert await second == ["first"]
    assert await coalescer.run([("GET", "x")]) == ["first"]


async def test_a_dropped_connection_fails_its_round_trip_and_the_next_call_reconnects(
    redis: Redis,
) -> None:
    coalescer = Coalescer(redis)
    (own,) = await coalescer.run([("CLIENT", "ID")])
    killed, after = await asyncio.gather(
        coalescer.run([("CLIENT", "KILL", "ID", own, "SKIPME", "no")]),  # it hangs up
        coalescer.run([("PING",)]),
        return_exceptions=True,
    )
    assert isinstance(killed, ConnectionError)
    assert isinstance(after, ConnectionError)
    assert await coalescer.run([("PING",)]) == ["PONG"]


async def test_the_connection_kept_between_round_trips_is_checked_before_it_is_used(
    redis: Redis,
) -> None:
    """The coalescer keeps its last connection instead of giving it back to the pool; like the
    pool, it connects again when the server has closed it since (or left data unread)."""
    coalescer = Coalescer(redis)
    (own,) = await coalescer.run([("CLIENT", "ID")])
    assert (await coalescer.run([("CLIENT", "ID")]))[0] == own  # the same connection, kept
    assert connections(redis) == 1
    kept = coalescer._kept
    assert kept is not None
    await redis.execute_command("CLIENT", "KILL", "ID", own)  # another connection of the pool
    deadline = asyncio.get_running_loop().time() + 5
    while not await kept.can_read():  # the loop has seen the close
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.001)
    (again,) = await coalescer.run([("CLIENT", "ID")])
    assert again != own  # connected again, not failed


async def test_replies_later_than_the_socket_timeout_fail_as_a_redis_timeout(
    redis_url: str,
) -> None:
    slow = Redis.from_pool(
        BlockingConnectionPool.from_url(redis_url, decode_responses=True, socket_timeout=0.05)
    )
    try:
        coalescer = Coalescer(slow)
        with pytest.raises(TimeoutError):  # BLPOP answers when its 1 s have passed
            await asyncio.gather(coalescer.run([("PING",)]), coalescer.run([("BLPOP", "no", 1)]))
        assert await coalescer.run([("PING",)]) == ["PONG"]
    finally:
        await slow.aclose()


async def test_with_replicas_to_confirm_each_caller_gets_the_wait_answer_last(
    redis: Redis,
) -> None:
    coalescer = Coalescer(redis, Durability(replicas=1, timeout=0.01))
    replies = await asyncio.gather(*(coalescer.run([("SET", f"w{i}", i)]) for i in range(3)))
    assert replies == [["OK", 0]] * 3  # no replica here: WAIT answers 0


async def test_an_enqueue_whose_shared_answer_was_lost_is_stored_once(
    stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shared round trip ran the script but its connection broke before the answer came:
    the enqueue goes again through redis-py's pipeline and reads its tasks back as stored."""
    await stores.queues.put("q", QueuePolicy(), stores.clock.now_ms())
    now = stores.clock.now_ms()
    coalescer = stores.tasks._coalescer
    assert coalescer is not None
    shared = coalescer.run

    async def answer_lost(commands: Sequence[Command]) -> list[Any]:
        await shared(commands)
        raise ConnectionError("Connection closed by server.")

    monkeypatch.setattr(coalescer, "run", answer_lost)
    task = NewTask(
        id=str(ULID()), name="t", payload_json="{}", priority=0, created_ms=now, run_at_ms=now
    )
    assert await stores.tasks.enqueue("q", [task], now) == [Stored(TaskState.QUEUED)]
    assert await stores.redis.hlen(QueueKeys.of("q").meta) == 1
    assert await stores.redis.zcard(QueueKeys.of("q").ready) == 1
    assert await stores.tasks.locate(task.id) == "q"
