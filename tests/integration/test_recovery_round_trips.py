"""What a due queue's recovery costs in round trips to Redis: a busy queue turns due once for
its promotion, and at 1,000 busy queues those round trips were half of the gateway's growth in
CPU per task (bench/RESULTS.md, "How cost grows"). One script promotes, looks at the rest and
reckons (``lua/recover.lua``); the work it finds nothing of costs no round trip; one more
settles the queue's entry in the due index. It took ten."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

import pytest
from redis.asyncio.connection import AbstractConnection

from gateway.store.keys import QueueKeys

from .conftest import Stores
from .test_due_index import count_commands, recoverer
from .test_recoverer import LEASE_MS, claim, enqueue, make_queue


class RoundTrips:
    """Counts what the Redis clients send: one send is one round trip (a pipeline is one)."""

    def __init__(self) -> None:
        self.sent = 0

    async def during(self, step: Awaitable[object]) -> int:
        before = self.sent
        await step
        return self.sent - before


@pytest.fixture
def round_trips(monkeypatch: pytest.MonkeyPatch) -> RoundTrips:
    counter = RoundTrips()
    send = AbstractConnection.send_packed_command

    async def counted(self: AbstractConnection, *args: Any, **kwargs: Any) -> None:
        counter.sent += 1
        await send(self, *args, **kwargs)

    monkeypatch.setattr(AbstractConnection, "send_packed_command", counted)
    return counter


async def test_a_queue_due_for_its_promotion_costs_two_round_trips(
    stores: Stores, round_trips: RoundTrips
) -> None:
    now = stores.clock.now_ms()
    for name in ("a", "b", "c"):
        await make_queue(stores, name=name, stall_policy="redispatch", max_heartbeat_interval=5)
        await enqueue(stores, queue=name, run_at=now + 1_000)
    rec = recoverer(stores)  # with the outbox and links to deliver, as in the gateway
    assert await round_trips.during(rec.step(now + 999)) == 1  # the head of the index
    report = await round_trips.during(rec.step(now + 1_000))
    # The head of the index and the marks, then for each queue recover.lua and the settling of
    # its entry (which, on a single Redis, reads what was announced meanwhile itself).
    assert report == 2 + 2 * 3
    for name in ("a", "b", "c"):
        assert await stores.tasks.due_of(name) is None
        assert await stores.redis.zcard(QueueKeys.of(name).ready) == 1


async def test_the_same_costs_no_more_commands_in_redis(stores: Stores) -> None:
    """Counted by Redis, commands run by scripts included: a probe that would read a whole set
    or a policy again shows here."""
    await make_queue(stores)
    now = stores.clock.now_ms()
    await enqueue(stores, run_at=now + 1_000)
    rec = recoverer(stores)
    commands = await count_commands(stores.redis, rec.step(now + 1_000))
    # 37 when it took ten round trips, 36 while its look and its reckoning read each set twice
    assert commands <= 27, commands


async def test_work_found_due_takes_the_long_way_and_is_reckoned_after(
    stores: Stores, round_trips: RoundTrips
) -> None:
    await make_queue(stores)
    now = stores.clock.now_ms()
    await enqueue(stores)
    await claim(stores)
    await enqueue(stores, run_at=now + LEASE_MS)
    rec = recoverer(stores)
    step = rec.step(now + LEASE_MS)
    trips = await round_trips.during(step)
    assert trips > 2 + 3  # the expiry's read and finish, then reckon_due
    assert await stores.redis.zcard(QueueKeys.of("q").ready) == 1  # the task promoted
    assert await stores.redis.zcard(QueueKeys.of("q").running) == 0  # the lease expired
    assert await stores.tasks.due_of("q") is not None  # the retry's backoff
