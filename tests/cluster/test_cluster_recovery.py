"""The recoverer on a Redis Cluster: a due queue's recovery (``lua/recover.lua``) runs on its
queue's slot, and the settling of its entry in the due index (another slot) reads the queue's
``due`` field in a command of its own, so a time announced after the reckoning is kept."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from ulid import ULID

from gateway.background.recover_loop import Recoverer, RecoveryReport
from gateway.store.clock import ManualClock
from gateway.store.connection import connect
from gateway.store.dependencies import DependencyStore
from gateway.store.queues import QueueStore
from gateway.store.records import NewTask
from gateway.store.scripts import Scripts
from gateway.store.tasks import Looked, TaskStore
from tests.integration.conftest import Stores
from tests.integration.test_recoverer import LEASE_MS, claim, enqueue, make_queue

from .test_cluster_flows import LEFT, RIGHT


@pytest.fixture
async def stores(cluster_url: str) -> AsyncIterator[Stores]:
    redis = await connect(cluster_url)
    scripts = Scripts(redis)
    await scripts.load()
    yield Stores(redis, TaskStore(redis, scripts), QueueStore(redis, scripts), ManualClock())
    await redis.aclose()


def recoverer(s: Stores, tasks: TaskStore | None = None) -> Recoverer:
    dependencies = DependencyStore(s.redis, Scripts(s.redis))
    return Recoverer(tasks or s.tasks, s.queues, s.clock, dependencies=dependencies)


class AnnouncesAfterReckoning(TaskStore):
    """Another gateway enqueues a delayed task right after the recovery reckoned."""

    run_at: int

    async def promote_and_look(
        self, queue: str, now_ms: int, limit: int, sweep_every_ms: int
    ) -> Looked:
        looked = await super().promote_and_look(queue, now_ms, limit, sweep_every_ms)
        task = NewTask(str(ULID()), "t", "null", 0, now_ms, self.run_at)
        await self.enqueue(queue, [task], now_ms)
        return looked


async def test_queues_on_two_primaries_are_promoted_and_settled(stores: Stores) -> None:
    now = stores.clock.now_ms()
    for queue in (LEFT, RIGHT):
        await make_queue(stores, name=queue)
        await enqueue(stores, queue=queue, run_at=now + 1_000)
    rec = recoverer(stores)
    assert await rec.step(now + 1_000) == RecoveryReport(promoted=2)
    assert [await stores.tasks.due_of(q) for q in (LEFT, RIGHT)] == [None, None]
    assert rec.next_due_ms is None


async def test_a_time_announced_after_the_reckoning_is_kept(stores: Stores) -> None:
    await make_queue(stores, name=LEFT)
    now = stores.clock.now_ms()
    await enqueue(stores, queue=LEFT, run_at=now + 1_000)
    tasks = AnnouncesAfterReckoning(stores.redis, Scripts(stores.redis))
    tasks.run_at = now + 60_000  # after the mark: the entry's ZADD LT left it alone
    rec = recoverer(stores, tasks)
    assert (await rec.step(now + 1_000)).promoted == 1
    assert await stores.tasks.due_of(LEFT) == now + 60_000


async def test_an_expired_lease_takes_the_long_way(stores: Stores) -> None:
    await make_queue(stores, name=RIGHT)
    now = stores.clock.now_ms()
    await enqueue(stores, queue=RIGHT)
    await claim(stores, queue=RIGHT)
    rec = recoverer(stores)
    report = await rec.step(now + LEASE_MS)
    assert (report.expired, report.retried) == (1, 1)
    assert await stores.tasks.due_of(RIGHT) is not None  # the retry's backoff
