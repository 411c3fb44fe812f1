"""The due index: the recoverer finds due work of any queue with one read, not a scan per queue,
and nothing due is lost when a gateway dies half way (the slow rescan repairs it).

Steps are driven one at a time with a manual clock, except for the running loop's timing test,
which runs :meth:`Recoverer.run` on the wall clock with pub/sub wake-ups.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable

import pytest
from redis.asyncio import Redis
from ulid import ULID

from gateway.background.recover_loop import RECKON_EVERY, Recoverer, RecoveryReport
from gateway.store.clock import ManualClock
from gateway.store.dependencies import DependencyStore
from gateway.store.keys import DUE, QueueKeys
from gateway.store.pubsub import Notifier
from gateway.store.queues import QueueStore
from gateway.store.records import NewTask
from gateway.store.scripts import Scripts
from gateway.store.tasks import Looked, TaskStore
from gateway.store.tasks.due import HOLD_MS, mark
from sdk.wire import TaskState
from tests.support import until

from .conftest import Stores
from .test_recoverer import LEASE_MS, claim, enqueue, make_queue, record


def recoverer(s: Stores, tasks: TaskStore | None = None, sweep_interval: float = 60) -> Recoverer:
    return Recoverer(
        tasks or s.tasks,
        s.queues,
        s.clock,
        dependencies=DependencyStore(s.redis, Scripts(s.redis)),
        sweep_interval=sweep_interval,
    )


async def commands(redis: Redis) -> int:
    """Commands Redis has run so far, not counting this INFO."""
    return int((await redis.info("stats"))["total_commands_processed"])


async def count_commands(redis: Redis, step: Awaitable[object]) -> int:
    """How many commands Redis ran for ``await step``, those run by scripts included (nothing
    else talks to it meanwhile)."""
    before = await commands(redis)
    await step
    return await commands(redis) - before - 1  # the first INFO is counted in the second's total


@pytest.fixture
async def other_gateway(stores: Stores, redis_url: str) -> AsyncIterator[Stores]:
    redis = Redis.from_url(redis_url, decode_responses=True)
    scripts = Scripts(redis)
    await scripts.load()
    yield Stores(redis, TaskStore(redis, scripts), QueueStore(redis, scripts), stores.clock)
    await redis.aclose()


# --- (a) one read finds the due queues ---------------------------------------------------------


async def test_a_step_costs_the_same_whatever_the_number_of_idle_queues(stores: Stores) -> None:
    """Redis counts the commands scripts run too, so a step's cost is compared between 10 and
    200 queues rather than predicted: it depends on what is due, not on how many queues."""
    start = stores.clock.now_ms()
    costs = []
    for queues in (10, 200):
        await stores.redis.flushall()
        for i in range(queues):
            await make_queue(stores, name=f"q{i:03d}")
            await enqueue(stores, queue=f"q{i:03d}", run_at=start + 3_600_000 + i)  # far
        for i in range(3):  # and three queues with something due soon
            await enqueue(stores, queue=f"q{i:03d}", run_at=start + 1_000)
        rec = recoverer(stores)

        # Nothing due: one command (the head of the index), however many queues exist.
        assert await count_commands(stores.redis, rec.step(start + 999)) == 1
        assert rec.next_due_ms == start + 1_000
        # Three due: their work, and none for the other queues.
        costs.append(await count_commands(stores.redis, rec.step(start + 1_000)))
        assert rec.next_due_ms == start + 3_600_000
        assert await count_commands(stores.redis, rec.step(start + 1_001)) == 1
    assert costs[0] == costs[1] < 3 * 40, costs


async def test_the_index_holds_each_queues_earliest_due_time(stores: Stores) -> None:
    await make_queue(stores, max_heartbeat_interval=3, stall_policy="redispatch")
    now = stores.clock.now_ms()
    assert await stores.tasks.due_of("q") is None  # a new queue owes nothing
    await enqueue(stores, run_at=now + 60_000)
    assert await stores.tasks.due_of("q") == now + 60_000
    await enqueue(stores)
    await claim(stores)  # a lease expiring in 10 s, a stall deadline in 3 s
    assert await stores.tasks.due_of("q") == now + 3_000
    await enqueue(stores, run_at=now + 30_000)  # not earlier: the index is not written
    assert await stores.tasks.due_of("q") == now + 3_000


# --- (b) on time -------------------------------------------------------------------------------


class WallClock:
    def now_ms(self) -> int:
        return int(time.time() * 1000)


async def test_the_running_loop_promotes_and_expires_on_time(
    stores: Stores, other_gateway: Stores
) -> None:
    """A recoverer asleep (nothing due) is woken over pub/sub by another gateway's enqueue and
    claim, and handles the due task and the expired lease within its interval."""
    clock = WallClock()
    interval = 0.05
    promoted_at: list[int] = []
    rec = Recoverer(
        stores.tasks,
        stores.queues,
        clock,
        interval=interval,
        on_ready=lambda q: promoted_at.append(clock.now_ms()),
    )
    notifier = Notifier(stores.redis, on_wake=lambda q, n: None, on_due=rec.notice)
    await notifier.start()
    running = asyncio.create_task(rec.run())
    try:
        other_gateway.clock = ManualClock(clock.now_ms())
        await make_queue(other_gateway, lease_timeout=0.3)
        await until(lambda: rec.next_due_ms is None, what="the recoverer to sleep")

        run_at = clock.now_ms() + 300
        other_gateway.clock = ManualClock(clock.now_ms())
        task_id = await enqueue(other_gateway, run_at=run_at)
        await until(lambda: promoted_at, what="the promotion")
        late_ms = promoted_at[0] - run_at
        assert 0 <= late_ms <= interval * 1000 + 250, late_ms

        other_gateway.clock = ManualClock(clock.now_ms())
        (lease,) = await claim(other_gateway)
        expired = await until(lambda: _expired_at(stores, task_id), what="the expiry")
        late_ms = expired - lease.expires_ms
        assert 0 <= late_ms <= interval * 1000 + 250, late_ms
    finally:
        # stop() as the gateway's shutdown does: a cancellation landing inside a Redis call can
        # be absorbed by the client, and the loop would then sleep on for up to a minute.
        rec.stop()
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
        await notifier.stop()


async def _expired_at(s: Stores, task_id: str) -> int | None:
    """When the task's first attempt ended, once its expiry was recorded."""
    t = await record(s, task_id)
    if t["state"] == TaskState.RUNNING:
        return None
    raw = await s.redis.hget(QueueKeys.of("q").attempts, f"{task_id}:1")
    assert raw is not None
    attempt = json.loads(raw)
    assert attempt["outcome"] == "expired"
    return int(attempt["ended"])


# --- (c) crashes -------------------------------------------------------------------------------


class DiesBeforeTheIndex(Scripts):
    """A gateway that dies right after each script, before it updates the due index."""

    async def lower_due(self, queue: str, due_ms: int) -> None:
        return None


async def test_a_due_time_lost_with_a_gateway_is_found_by_the_rescan(
    stores: Stores, redis_url: str
) -> None:
    await make_queue(stores)
    now = stores.clock.now_ms()
    dying = DiesBeforeTheIndex(stores.redis)
    crashed = Stores(stores.redis, TaskStore(stores.redis, dying), stores.queues, stores.clock)
    task_id = await enqueue(crashed, run_at=now + 1_000)
    await enqueue(stores, run_at=now + 2_000)  # later: compared with what was announced, so
    assert await stores.tasks.due_of("q") is None  # it does not write the index either
    rec = recoverer(stores)

    assert await rec.step(now + 1_000) == RecoveryReport()  # the index does not know
    assert await rec.rescan() == 1
    assert await stores.tasks.due_of("q") == now + 1_000
    assert await rec.step(now + 1_000) == RecoveryReport(promoted=1)
    assert (await record(stores, task_id))["state"] == TaskState.QUEUED
    assert await stores.tasks.due_of("q") == now + 2_000


async def test_a_policy_change_lost_with_a_gateway_is_found_by_the_rescan(
    stores: Stores,
) -> None:
    await make_queue(stores, retention_failed=3600)
    now = stores.clock.now_ms()
    await stores.tasks.cancel("q", await enqueue(stores), now)
    rec = recoverer(stores, sweep_interval=0)
    crashed = QueueStore(stores.redis, DiesBeforeTheIndex(stores.redis))
    await crashed.patch("q", {"retention_failed": 60}, now + 1)
    assert await stores.tasks.due_of("q") == now + 3_600_000  # the index does not know
    assert await rec.rescan() == 1
    assert await rec.step(now + 1) == RecoveryReport()
    assert (await rec.step(now + 60_000)).swept == 1


async def test_a_lost_index_is_built_again_at_start_and_every_hour(stores: Stores) -> None:
    """Redis restored without it, or queues written by a version that had none."""
    now = stores.clock.now_ms()
    for name, run_at in (("a", now + 5_000), ("b", now + 1_000), ("c", None)):
        await make_queue(stores, name=name)
        if run_at is not None:
            await enqueue(stores, queue=name, run_at=run_at)
        await stores.redis.hdel(QueueKeys.of(name).policy, "due")
    await stores.redis.delete(DUE)
    rec = recoverer(stores)
    assert await rec.rescan() == 0  # the quick check cannot know: nothing was told
    assert await rec.reckon_all(now) == 2
    rebuilt = [("b", now + 1_000), ("a", now + 5_000)]
    assert await stores.redis.zrange(DUE, 0, -1, withscores=True) == rebuilt

    # The scheduled rescan does the full reckoning too, now and then.
    await stores.redis.delete(DUE)
    for name in ("a", "b", "c"):
        await stores.redis.hdel(QueueKeys.of(name).policy, "due")
    for _ in range(RECKON_EVERY - 1):
        await rec.rescan_job()
    assert await stores.redis.zcard(DUE) == 0
    await rec.rescan_job()
    assert await stores.redis.zrange(DUE, 0, -1, withscores=True) == rebuilt


async def test_a_queue_taken_in_hand_by_a_recoverer_that_died_is_due_again_later(
    stores: Stores,
) -> None:
    await make_queue(stores)
    now = stores.clock.now_ms()
    await enqueue(stores, run_at=now + 1)
    # At its due time, a recoverer set the mark, then died before doing the queue's work.
    await stores.tasks.hold(["q"], mark(now + 1))
    rec = recoverer(stores)
    assert await rec.step(now + 1 + HOLD_MS) == RecoveryReport()
    assert await rec.step(now + 2 + HOLD_MS) == RecoveryReport(promoted=1)
    assert await stores.tasks.due_of("q") is None


class AnnouncesWhileReckoning(TaskStore):
    """Another gateway enqueues a delayed task while this recoverer handles the queue: just
    before it reckons, or just after."""

    other: TaskStore
    run_at: int
    after: bool

    async def promote_and_look(
        self, queue: str, now_ms: int, limit: int, sweep_every_ms: int
    ) -> Looked:
        # Due only for its promotion, the queue is reckoned in the same script.
        if not self.after:
            await self._enqueue(queue, now_ms)
        looked = await super().promote_and_look(queue, now_ms, limit, sweep_every_ms)
        if self.after:
            await self._enqueue(queue, now_ms)
        return looked

    async def _enqueue(self, queue: str, now_ms: int) -> None:
        task = NewTask(str(ULID()), "t", "null", 0, now_ms, self.run_at)
        await self.other.enqueue(queue, [task], now_ms)


@pytest.mark.parametrize("after", [False, True])
@pytest.mark.parametrize("ahead_ms", [5_000, 60_000])  # before the mark, after it
async def test_a_due_time_announced_while_the_queue_is_handled_is_kept(
    stores: Stores, other_gateway: Stores, after: bool, ahead_ms: int
) -> None:
    await make_queue(stores)
    now = stores.clock.now_ms()
    await enqueue(stores, run_at=now + 1_000)
    tasks = AnnouncesWhileReckoning(stores.redis, Scripts(stores.redis))
    tasks.other, tasks.run_at, tasks.after = other_gateway.tasks, now + 1_000 + ahead_ms, after
    rec = recoverer(stores, tasks=tasks)
    assert (await rec.step(now + 1_000)).promoted == 1
    assert await stores.tasks.due_of("q") == now + 1_000 + ahead_ms


async def test_a_queue_whose_recovery_fails_is_tried_again_at_its_mark(stores: Stores) -> None:
    await make_queue(stores)
    now = stores.clock.now_ms()
    await enqueue(stores, run_at=now + 1)
    await stores.redis.hset(QueueKeys.of("q").policy, "policy", "not json")
    rec = recoverer(stores)
    assert await rec.step(now + 1) == RecoveryReport(errors=1)
    assert rec.next_due_ms == now + 1 + HOLD_MS + 1  # not the next rescan, a minute later
    assert await rec.step(now + 1 + HOLD_MS) == RecoveryReport()


async def test_entries_of_deleted_queues_are_dropped(stores: Stores) -> None:
    await make_queue(stores)
    now = stores.clock.now_ms()
    await enqueue(stores, run_at=now + 1_000)
    await stores.redis.delete(*QueueKeys.of("q").all())  # deleted behind the index's back
    rec = recoverer(stores)
    assert await rec.step(now + 1_000) == RecoveryReport()
    assert await stores.redis.zcard(DUE) == 0
    await make_queue(stores)
    await stores.queues.delete("q", force=True)
    assert await stores.redis.zcard(DUE) == 0


async def test_a_changed_policy_makes_the_queue_due_to_reckon_it_again(stores: Stores) -> None:
    await make_queue(stores, retention_failed=3600)
    now = stores.clock.now_ms()
    await stores.tasks.cancel("q", await enqueue(stores), now)
    rec = recoverer(stores, sweep_interval=0)
    assert await stores.tasks.due_of("q") == now + 3_600_000
    await stores.queues.patch("q", {"retention_failed": 60}, now + 1)
    assert await stores.tasks.due_of("q") == now + 1
    assert await rec.step(now + 1) == RecoveryReport()
    assert await stores.tasks.due_of("q") == now + 60_000
    assert (await rec.step(now + 60_000)).swept == 1


async def test_a_stray_lease_entry_is_dropped_rather_than_due_for_ever(stores: Stores) -> None:
    await make_queue(stores)
    now = stores.clock.now_ms()
    await stores.redis.zadd(QueueKeys.of("q").running, {"01STRAY0000000000000000000": now})
    await stores.tasks.lower_due("q", now)
    rec = recoverer(stores)
    assert await rec.step(now) == RecoveryReport(skipped=1)
    assert await stores.redis.zcard(QueueKeys.of("q").running) == 0
    assert await stores.tasks.due_of("q") is None


async def test_an_earlier_due_time_wakes_other_gateways_over_pub_sub(
    stores: Stores, other_gateway: Stores
) -> None:
    noticed: list[int] = []
    notifier = Notifier(stores.redis, on_wake=lambda q, n: None, on_due=noticed.append)
    await notifier.start()
    try:
        await make_queue(other_gateway)
        now = other_gateway.clock.now_ms()
        await enqueue(other_gateway, run_at=now + 5_000)
        await until(lambda: noticed, what="the notice")
        await enqueue(other_gateway, run_at=now + LEASE_MS)  # not the earliest: no message
        await enqueue(other_gateway, run_at=now + 1_000)
        await until(lambda: len(noticed) == 2, what="the second notice")
        assert noticed == [now + 5_000, now + 1_000]
    finally:
        await notifier.stop()
