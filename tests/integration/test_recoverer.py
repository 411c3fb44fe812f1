"""The recoverer against a real Redis, one step at a time with a manual clock (no sleeps)."""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import socket
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.util import iscoroutinefunction_partial
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from ulid import ULID

from gateway.background.recover_loop import RECKON_EVERY, RESCAN_JOB_ID, Recoverer, RecoveryReport
from gateway.store.clock import ManualClock
from gateway.store.endpoint_records import EndpointRecord
from gateway.store.index import IndexRepair
from gateway.store.keys import DUE, INDEX_SUSPECTS, INDEX_TURN, QueueKeys, task_index
from gateway.store.queues import QueueStore
from gateway.store.records import Lease, NewTask
from gateway.store.scripts import Scripts
from gateway.store.tasks import CancelResult, Expired, Finish, TaskStore
from gateway.store.tasks.due import HOLD_MS
from sdk.wire import AttemptOutcome, Backoff, BackoffStrategy, QueuePolicy, TaskState

from .conftest import Stores

Q = "q"
LEASE_MS = 10_000


# --- helpers ----------------------------------------------------------------------------------


async def make_queue(s: Stores, name: str = Q, **policy: object) -> None:
    policy.setdefault("lease_timeout", LEASE_MS / 1000)
    await s.queues.put(name, QueuePolicy.model_validate(policy), s.clock.now_ms())
    await s.queues.add_endpoint(
        EndpointRecord(
            id="ep1",
            queue=name,
            url="http://127.0.0.1:1/",
            concurrency=100,
            capabilities=[],
            secrets=["whsec_x"],
            created_ms=s.clock.now_ms(),
        )
    )


async def enqueue(s: Stores, *, run_at: int | None = None, queue: str = Q) -> str:
    now = s.clock.now_ms()
    task = NewTask(
        id=str(ULID()),
        name="t",
        payload_json="null",
        priority=0,
        created_ms=now,
        run_at_ms=now if run_at is None else run_at,
    )
    await s.tasks.enqueue(queue, [task], now)
    return task.id


async def claim(s: Stores, n: int = 1, queue: str = Q, *, accepted: bool = True) -> list[Lease]:
    """Claim ``n`` tasks. ``accepted``: their endpoint answered 202, so a lease running out is
    its failure (retried with backoff), not a push nobody saw answered (retried at once)."""
    now = s.clock.now_ms()
    leases = (await s.tasks.claim(queue, n, secrets.token_hex(16), now)).leases
    if accepted:
        await s.tasks.accept_many(queue, [(x.task_id, x.token) for x in leases], now)
    return leases


async def record(s: Stores, task_id: str, queue: str = Q) -> dict[str, object]:
    found = await s.tasks.record(queue, task_id)
    assert found is not None
    return found


async def history(s: Stores, task_id: str) -> list[dict[str, object]]:
    read = await s.tasks.read(Q, task_id)
    assert read is not None
    return [json.loads(a) for a in read[4]]


def recoverer(
    s: Stores, tasks: TaskStore | None = None, batch: int = 500, sweep_interval: float = 60
) -> tuple[Recoverer, list[str]]:
    """A recoverer on the test's stores, and the list its on_ready calls append to."""
    ready: list[str] = []
    rec = Recoverer(
        tasks or s.tasks,
        s.queues,
        s.clock,
        on_ready=ready.append,
        batch=batch,
        sweep_interval=sweep_interval,
    )
    return rec, ready


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.fixture
async def other_gateway(stores: Stores, redis_url: str) -> AsyncIterator[Stores]:
    """A second gateway on the same Redis: its own connection, scripts and stores."""
    redis = Redis.from_url(redis_url, decode_responses=True)
    scripts = Scripts(redis)
    await scripts.load()
    yield Stores(redis, TaskStore(redis, scripts), QueueStore(redis, scripts), stores.clock)
    await redis.aclose()


# --- promoting ---------------------------------------------------------------------------------


async def test_a_delayed_task_is_promoted_only_when_due(stores: Stores) -> None:
    await make_queue(stores)
    task_id = await enqueue(stores, run_at=stores.clock.now_ms() + 5_000)
    rec, ready = recoverer(stores)

    stores.clock.advance(4_999)
    assert await rec.step() == RecoveryReport()
    assert ready == []
    assert await claim(stores) == []

    stores.clock.advance(1)
    assert await rec.step() == RecoveryReport(promoted=1)
    assert ready == [Q]
    assert (await record(stores, task_id))["state"] == TaskState.QUEUED
    assert [lease.task_id for lease in await claim(stores)] == [task_id]

    assert await rec.step() == RecoveryReport()
    assert ready == [Q]


async def test_promoting_drains_more_than_one_batch_and_wakes_once(stores: Stores) -> None:
    await make_queue(stores)
    due = stores.clock.now_ms() + 1_000
    ids = {await enqueue(stores, run_at=due) for _ in range(5)}
    rec, ready = recoverer(stores, batch=2)
    assert (await rec.step(due)).promoted == 5
    assert ready == [Q]
    assert {lease.task_id for lease in await claim(stores, 10)} == ids


async def test_step_uses_the_given_time_over_the_clock(stores: Stores) -> None:
    await make_queue(stores)
    await enqueue(stores, run_at=stores.clock.now_ms() + 60_000)
    rec, _ = recoverer(stores)
    assert (await rec.step(stores.clock.now_ms() + 60_000)).promoted == 1


# --- expiring leases ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("strategy", "base", "delays_ms"),
    [
        (BackoffStrategy.CONSTANT, 1.5, [1_500, 1_500, 1_500]),
        (BackoffStrategy.LINEAR, 1.5, [1_500, 3_000, 4_500]),
        (BackoffStrategy.EXPONENTIAL, 0.75, [750, 1_500, 3_000]),
    ],
)
async def test_an_expired_lease_is_retried_with_backoff_then_dead_lettered(
    stores: Stores, strategy: BackoffStrategy, base: float, delays_ms: list[int]
) -> None:
    backoff = Backoff(strategy=strategy, base_delay=base, max_delay=60)
    await make_queue(stores, max_attempts=len(delays_ms) + 1, backoff=backoff)
    task_id = await enqueue(stores)
    rec, ready = recoverer(stores)
    k = QueueKeys.of(Q)

    for attempt, delay in enumerate(delays_ms, start=1):
        (lease,) = await claim(stores)
        assert lease.attempt == attempt
        stores.clock.advance(LEASE_MS - 1)
        assert await rec.step() == RecoveryReport()
        stores.clock.advance(1)
        assert await rec.step() == RecoveryReport(expired=1, retried=1)
        now = stores.clock.now_ms()
        t = await record(stores, task_id)
        assert (t["state"], t["run_at"]) == (TaskState.SCHEDULED, now + delay)
        assert await stores.redis.zscore(k.scheduled, task_id) == now + delay
        assert ready == [Q] * (attempt - 1)  # a retry waiting for its delay wakes nobody

        stores.clock.advance(delay - 1)
        assert (await rec.step()).promoted == 0
        stores.clock.advance(1)
        assert (await rec.step()).promoted == 1
        assert ready == [Q] * attempt

    await claim(stores)
    stores.clock.advance(LEASE_MS)
    assert await rec.step() == RecoveryReport(expired=1, dead=1)
    t = await record(stores, task_id)
    assert t["state"] == TaskState.DEAD
    assert await stores.redis.zscore(k.dead, task_id) == stores.clock.now_ms()
    attempts = await history(stores, task_id)
    assert [(a["n"], a["outcome"], a["error"]) for a in attempts] == [
        (n, "expired", "lease expired") for n in range(1, len(delays_ms) + 2)
    ]
    assert await stores.redis.zcard(k.running) == 0


async def test_exhausted_attempts_fail_when_dead_letter_is_off(stores: Stores) -> None:
    await make_queue(stores, max_attempts=1, dead_letter=False)
    task_id = await enqueue(stores)
    await claim(stores)
    rec, ready = recoverer(stores)
    stores.clock.advance(LEASE_MS)
    assert await rec.step() == RecoveryReport(expired=1, failed=1)
    assert (await record(stores, task_id))["state"] == TaskState.FAILED
    assert await stores.redis.zscore(QueueKeys.of(Q).failed, task_id) is not None
    assert ready == []


async def test_a_retry_without_delay_goes_straight_to_ready_and_wakes(stores: Stores) -> None:
    backoff = Backoff(strategy=BackoffStrategy.CONSTANT, base_delay=0, max_delay=0)
    await make_queue(stores, backoff=backoff)
    task_id = await enqueue(stores)
    await claim(stores)
    rec, ready = recoverer(stores)
    stores.clock.advance(LEASE_MS)
    assert await rec.step() == RecoveryReport(expired=1, retried=1)
    assert (await record(stores, task_id))["state"] == TaskState.QUEUED
    assert ready == [Q]


async def test_jittered_delays_stay_within_the_capped_exponential(stores: Stores) -> None:
    backoff = Backoff(strategy=BackoffStrategy.EXPONENTIAL_JITTER, base_delay=4, max_delay=5)
    await make_queue(stores, backoff=backoff, max_attempts=10)
    ids = [await enqueue(stores) for _ in range(20)]
    await claim(stores, 20)
    stores.clock.advance(LEASE_MS)
    now = stores.clock.now_ms()
    rec, _ = recoverer(stores)
    assert (await rec.step()).retried == 20
    run_ats = [int(str((await record(stores, i))["run_at"])) for i in ids]
    assert all(now <= r <= now + 4_000 for r in run_ats)  # attempt 1: uniform(0, 4 s)
    assert len(set(run_ats)) > 1


async def test_expiries_drain_more_than_one_batch(stores: Stores) -> None:
    await make_queue(stores)
    for _ in range(5):
        await enqueue(stores)
    await claim(stores, 5)
    rec, _ = recoverer(stores, batch=2)
    stores.clock.advance(LEASE_MS)
    assert await rec.step() == RecoveryReport(expired=5, retried=5)
    assert await stores.redis.zcard(QueueKeys.of(Q).running) == 0


class HeartbeatAfterRead(TaskStore):
    """A task store whose worker heartbeats right after the recoverer read the expired leases."""

    async def expired(self, queue: str, now_ms: int, limit: int) -> list[Expired]:
        found = await super().expired(queue, now_ms, limit)
        for lease in found:
            await self.heartbeat(queue, lease.task_id, lease.token, now_ms)
        return found


async def test_a_heartbeat_between_expiry_read_and_finish_keeps_the_task_running(
    stores: Stores,
) -> None:
    await make_queue(stores)
    task_id = await enqueue(stores)
    (lease,) = await claim(stores)
    scripts = Scripts(stores.redis)
    rec, ready = recoverer(stores, tasks=HeartbeatAfterRead(stores.redis, scripts))
    stores.clock.advance(LEASE_MS)
    now = stores.clock.now_ms()

    assert await rec.step() == RecoveryReport(skipped=1)
    t = await record(stores, task_id)
    assert (t["state"], t["lease"], t["exp"]) == (TaskState.RUNNING, lease.token, now + LEASE_MS)
    assert await stores.redis.zscore(QueueKeys.of(Q).running, task_id) == now + LEASE_MS
    assert await history(stores, task_id) == []
    assert ready == []

    # Once the worker falls silent, the extended lease expires as usual.
    plain, _ = recoverer(stores)
    stores.clock.advance(LEASE_MS)
    assert await plain.step() == RecoveryReport(expired=1, retried=1)


async def test_a_cancel_requested_task_whose_lease_expires_ends_cancelled(
    stores: Stores,
) -> None:
    await make_queue(stores)
    task_id = await enqueue(stores)
    await claim(stores)
    assert await stores.tasks.cancel(Q, task_id, stores.clock.now_ms()) is CancelResult.REQUESTED
    rec, ready = recoverer(stores)
    stores.clock.advance(LEASE_MS)
    assert await rec.step() == RecoveryReport(expired=1, cancelled=1)
    assert (await record(stores, task_id))["state"] == TaskState.CANCELLED
    assert await stores.redis.zscore(QueueKeys.of(Q).cancelled, task_id) is not None
    # The attempt ended the task cancelled, and reads so (its kind says how: a timeout).
    assert [(a["outcome"], a["kind"]) for a in await history(stores, task_id)] == [
        ("cancelled", "timeout")
    ]
    assert ready == []


class ReadTogether(TaskStore):
    """A task store that holds every expiry read until both gateways have read theirs."""

    barrier: asyncio.Barrier

    async def expired(self, queue: str, now_ms: int, limit: int) -> list[Expired]:
        found = await super().expired(queue, now_ms, limit)
        if found:
            async with asyncio.timeout(5):
                await self.barrier.wait()
        return found


async def test_two_recoverers_at_the_same_instant_retry_a_task_once(
    stores: Stores, other_gateway: Stores
) -> None:
    await make_queue(stores)
    task_id = await enqueue(stores)
    await claim(stores)
    ReadTogether.barrier = asyncio.Barrier(2)
    first = ReadTogether(stores.redis, Scripts(stores.redis))
    second = ReadTogether(other_gateway.redis, Scripts(other_gateway.redis))
    a, ready_a = recoverer(stores, tasks=first)
    b, ready_b = recoverer(other_gateway, tasks=second)
    stores.clock.advance(LEASE_MS)

    reports = await asyncio.gather(a.step(), b.step())
    assert sorted(reports, key=lambda r: r.expired) == [
        RecoveryReport(skipped=1),
        RecoveryReport(expired=1, retried=1),
    ]
    t = await record(stores, task_id)
    assert (t["state"], t["att"], t["hist"]) == (TaskState.SCHEDULED, 1, 1)
    assert [a["outcome"] for a in await history(stores, task_id)] == ["expired"]
    assert await stores.redis.zcard(QueueKeys.of(Q).scheduled) == 1
    assert ready_a == ready_b == []


async def test_one_broken_queue_does_not_stall_the_others(
    stores: Stores, caplog: pytest.LogCaptureFixture
) -> None:
    for name in ("a-broken", "b-fine"):
        await make_queue(stores, name=name)
        await enqueue(stores, queue=name)
        await claim(stores, queue=name)
    await stores.redis.hset(QueueKeys.of("a-broken").policy, "policy", "not json")
    rec, _ = recoverer(stores)
    stores.clock.advance(LEASE_MS)
    with caplog.at_level(logging.ERROR, logger="gateway.background.recover_loop"):
        assert await rec.step() == RecoveryReport(expired=1, retried=1, errors=1)
    assert [r.getMessage() for r in caplog.records] == ["recovering queue 'a-broken' failed"]
    # The broken queue's entry keeps the mark: it is tried again later, not at every step.
    assert await stores.tasks.due_of("a-broken") == stores.clock.now_ms() + HOLD_MS + 0.5
    assert await rec.step() == RecoveryReport()


async def test_a_queue_whose_recovery_failed_is_taken_in_hand_at_once_when_redis_is_back(
    stores: Stores,
) -> None:
    # Redis failed half-way through a step (stood in for by a policy it cannot read, then
    # repaired): the queue's entry holds the mark, due HOLD_MS later. Once the pub/sub connection
    # is back (reconnected), the next step takes the queue in hand without waiting for the mark.
    await make_queue(stores)
    await enqueue(stores)
    await claim(stores)
    policy = await stores.redis.hget(QueueKeys.of(Q).policy, "policy")
    await stores.redis.hset(QueueKeys.of(Q).policy, "policy", "not json")
    rec, _ = recoverer(stores)
    stores.clock.advance(LEASE_MS)
    assert await rec.step() == RecoveryReport(errors=1)
    assert await rec.step() == RecoveryReport()  # at its mark: not retried at every step
    assert policy is not None
    await stores.redis.hset(QueueKeys.of(Q).policy, "policy", policy)
    rec.reconnected()
    assert rec.next_due_ms == stores.clock.now_ms()  # and woken now
    assert await rec.step() == RecoveryReport(expired=1, retried=1)
    assert await stores.tasks.due_of(Q) != stores.clock.now_ms() + HOLD_MS + 0.5


# --- sweeping ---------------------------------------------------------------------------------


async def test_finished_tasks_are_swept_when_their_retention_ends(stores: Stores) -> None:
    await make_queue(stores, retention_succeeded=60, retention_failed=120, max_attempts=1)
    start = stores.clock.now_ms()
    succeeded = await enqueue(stores)
    (lease,) = await claim(stores)
    done = Finish(succeeded, lease.token, AttemptOutcome.SUCCEEDED, text="1")
    await stores.tasks.finish(Q, done, start)
    cancelled = await enqueue(stores)
    await stores.tasks.cancel(Q, cancelled, start)
    dead = await enqueue(stores)
    await claim(stores)
    queued = await enqueue(stores)
    later = await enqueue(stores, run_at=start + 10 * 60_000)
    rec, _ = recoverer(stores, sweep_interval=0)
    stores.clock.advance(LEASE_MS)
    assert (await rec.step()).dead == 1  # dead at start + 10 s

    kept = {succeeded, cancelled, dead, queued, later}
    for at, swept in [
        (59_999, set()),
        (60_000, {succeeded}),
        (119_999, set()),
        (120_000, {cancelled}),
        (129_999, set()),
        (130_000, {dead}),
    ]:
        assert (await rec.step(start + at)).swept == len(swept), at
        kept -= swept
        for task_id in swept:
            assert await stores.tasks.record(Q, task_id) is None
            assert await stores.tasks.locate(task_id) is None
        for task_id in kept:
            assert await stores.tasks.record(Q, task_id) is not None
    assert kept == {queued, later}
    assert await rec.step(start + 10 * 60_000) == RecoveryReport(promoted=1)
    assert await stores.tasks.due_of(Q) is None  # nothing left that will ever be due


async def test_sweeps_of_a_queue_come_at_most_once_per_sweep_interval(stores: Stores) -> None:
    await make_queue(stores, retention_failed=1)
    start = stores.clock.now_ms()
    rec, _ = recoverer(stores, sweep_interval=60)
    for i in range(3):  # cancelled at start, start + 1 s, start + 2 s: each kept 1 s
        await stores.tasks.cancel(Q, await enqueue(stores), start + i * 1_000)
    assert (await rec.step(start + 1_000)).swept == 1
    # The next two are past retention 2 and 3 s after start, but wait for the sweep interval.
    assert await stores.tasks.due_of(Q) == start + 61_000
    assert (await rec.step(start + 60_999)).swept == 0
    assert (await rec.step(start + 61_000)).swept == 2


async def test_sweep_drains_more_than_one_batch(stores: Stores) -> None:
    await make_queue(stores, retention_failed=1)
    now = stores.clock.now_ms()
    for _ in range(5):
        await stores.tasks.cancel(Q, await enqueue(stores), now)
    rec, _ = recoverer(stores, batch=2)
    assert (await rec.step(now + 1_000)).swept == 5
    assert await stores.redis.hlen(QueueKeys.of(Q).meta) == 0


# --- scheduling --------------------------------------------------------------------------------


async def test_a_redis_error_in_a_scheduled_job_is_logged_and_the_job_goes_on(
    stores: Stores, caplog: pytest.LogCaptureFixture
) -> None:
    await make_queue(stores)
    rec, _ = recoverer(stores)
    await stores.redis.delete(DUE)
    await stores.redis.set(DUE, "not a sorted set")  # every ZRANGE now fails with WRONGTYPE
    with caplog.at_level(logging.DEBUG, logger="gateway.background.recover_loop"):
        assert not await rec.recover_job()
        assert not await rec.recover_job()
        await stores.redis.delete(DUE)
        assert await rec.recover_job()
    levels = [(r.levelname, r.exc_info[0] if r.exc_info else None) for r in caplog.records]
    assert levels == [("ERROR", ResponseError), ("DEBUG", None), ("WARNING", None)]
    assert "works again after 2 failed runs" in caplog.records[-1].getMessage()


async def test_scheduled_jobs_survive_an_unreachable_redis(
    caplog: pytest.LogCaptureFixture,
) -> None:
    broken = Redis.from_url(f"redis://127.0.0.1:{closed_port()}", decode_responses=True)
    scripts = Scripts(broken)
    rec = Recoverer(TaskStore(broken, scripts), QueueStore(broken, scripts), ManualClock())
    with pytest.raises(RedisConnectionError):
        await rec.step()
    with caplog.at_level(logging.ERROR, logger="gateway.background.recover_loop"):
        await rec.recover_job()
        await rec.rescan_job()
    await broken.aclose()
    assert [(r.levelname, r.exc_info[0] if r.exc_info else None) for r in caplog.records] == [
        ("ERROR", RedisConnectionError),
        ("ERROR", RedisConnectionError),
    ]


async def test_schedule_registers_the_rescan_job_with_its_interval(stores: Stores) -> None:
    rec, _ = recoverer(stores)
    scheduler = AsyncIOScheduler()
    rec.schedule(scheduler, rescan_interval=60)
    (job,) = scheduler.get_jobs()
    assert job.id == RESCAN_JOB_ID
    assert job.trigger.interval == timedelta(seconds=60)
    assert job.func == rec.rescan_job
    assert (job.max_instances, job.coalesce, job.misfire_grace_time) == (1, True, 60)
    # The asyncio executor awaits coroutine functions on its loop instead of a thread.
    assert iscoroutinefunction_partial(job.func)
    assert not scheduler.running


async def test_every_full_rescan_makes_a_pass_of_the_index_repair(stores: Stores) -> None:
    rec = Recoverer(
        stores.tasks,
        stores.queues,
        stores.clock,
        index_repair=IndexRepair(stores.redis, Scripts(stores.redis)),
    )
    rec.schedule(AsyncIOScheduler(), rescan_interval=60)
    orphan = str(ULID())
    await stores.redis.hset(task_index(orphan), orphan, Q)
    for _ in range(RECKON_EVERY - 1):
        await rec.rescan_job()
    assert not await stores.redis.exists(INDEX_TURN, INDEX_SUSPECTS)
    await rec.rescan_job()  # the full one
    assert 0 < await stores.redis.pttl(INDEX_TURN) <= 60 * RECKON_EVERY * 1000
    assert await stores.redis.hgetall(INDEX_SUSPECTS) == {orphan: Q}
    assert await rec.repair_index() is None  # the turn is taken until the next cadence
