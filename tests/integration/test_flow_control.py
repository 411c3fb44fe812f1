"""Flow control in the store, one script call at a time with a manual clock: dependencies and
groups, dedup and singleton keys, capabilities, the rate limit, the circuit breaker, stalls."""

from __future__ import annotations

import json
import secrets

from ulid import ULID

from gateway.background.recover_loop import Recoverer
from gateway.store.dependencies import DependencyStore
from gateway.store.endpoint_records import EndpointRecord
from gateway.store.keys import QueueKeys
from gateway.store.records import NewTask
from gateway.store.scripts import Scripts
from gateway.store.tasks import ClaimStatus, Finish
from sdk.wire import AttemptOutcome, CircuitBreaker, QueuePolicy, RateLimit, TaskState

from .conftest import Stores


def task(now: int, **kw: object) -> NewTask:
    fields: dict[str, object] = {"run_at_ms": now, **kw}
    return NewTask(
        id=str(ULID()),
        name="t",
        payload_json="null",
        priority=0,
        created_ms=now,
        **fields,  # type: ignore[arg-type]
    )


async def queue(
    s: Stores, name: str = "q", *, caps: tuple[list[str], ...] = ([],), **policy: object
) -> None:
    await s.queues.put(name, QueuePolicy.model_validate(policy), s.clock.now_ms())
    for i, capabilities in enumerate(caps):
        await s.queues.add_endpoint(
            EndpointRecord(
                id=f"ep{i}",
                queue=name,
                url="http://127.0.0.1:1/",
                concurrency=1000,
                capabilities=capabilities,
                secrets=["whsec_x"],
                created_ms=s.clock.now_ms(),
            )
        )


async def state(s: Stores, task_id: str, q: str = "q") -> TaskState:
    record = await s.tasks.record(q, task_id)
    assert record is not None
    return TaskState(record["state"])


async def run_all(s: Stores, q: str = "q", outcome: AttemptOutcome = AttemptOutcome.SUCCEEDED):
    """Claim every ready task and end each with ``outcome``; returns the ids, in claim order."""
    claim = await s.tasks.claim(q, 1000, secrets.token_hex(8), s.clock.now_ms())
    finishes = [Finish(x.task_id, x.token, outcome, text="null") for x in claim.leases]
    await s.tasks.finish_many(q, finishes, s.clock.now_ms())
    return [x.task_id for x in claim.leases]


# --- dependencies and groups ---------------------------------------------------------------


async def test_fan_in_of_a_group_of_100_releases_the_dependent_once(stores: Stores) -> None:
    await queue(stores)
    now = stores.clock.now_ms()
    members = [task(now, group="g") for _ in range(100)]
    after = task(now, after_group="g")
    stored = await stores.tasks.enqueue("q", [*members, after], now)
    assert stored[-1].state is TaskState.WAITING
    released = []
    for _start in range(0, 100, 7):  # the members end a few at a time
        claim = await stores.tasks.claim("q", 7, "s", stores.clock.now_ms())
        assert after.id not in [x.task_id for x in claim.leases]
        await stores.tasks.finish_many(
            "q",
            [Finish(x.task_id, x.token, AttemptOutcome.SUCCEEDED, text="1") for x in claim.leases],
            stores.clock.now_ms(),
        )
        released.append(await state(stores, after.id))
    assert released[:-1] == [TaskState.WAITING] * (len(released) - 1)
    assert released[-1] is TaskState.QUEUED
    assert await run_all(stores) == [after.id]
    assert await run_all(stores) == []
    assert await stores.redis.zcard(QueueKeys.of("q").waiting) == 0


async def test_a_failed_dependency_fails_its_dependents_down_the_chain(stores: Stores) -> None:
    await queue(stores, max_attempts=1, dead_letter=False)
    now = stores.clock.now_ms()
    first = task(now)
    second = task(now, depends_on=(first.id,))
    third = task(now, depends_on=(second.id,))
    await stores.tasks.enqueue("q", [first, second, third], now)
    assert await run_all(stores, outcome=AttemptOutcome.FAILED) == [first.id]
    for dependent in (second, third):
        record = await stores.tasks.record("q", dependent.id)
        assert record is not None
        assert record["state"] == "failed"
        assert "did not succeed" in record["error"]


async def test_cancelling_a_dependency_fails_the_dependent(stores: Stores) -> None:
    await queue(stores)
    now = stores.clock.now_ms()
    first = task(now, run_at_ms=now + 60_000)
    second = task(now, depends_on=(first.id,))
    await stores.tasks.enqueue("q", [first, second], now)
    await stores.tasks.cancel("q", first.id, now)
    assert await state(stores, second.id) is TaskState.DEAD


async def test_a_dependency_in_another_queue_releases_through_the_outbox(stores: Stores) -> None:
    await queue(stores, "a")
    await queue(stores, "b")
    deps = DependencyStore(stores.redis, Scripts(stores.redis))
    now = stores.clock.now_ms()
    upstream = task(now)
    await stores.tasks.enqueue("a", [upstream], now)
    downstream = task(now, depends_on=(upstream.id,), cross_deps=(("a", upstream.id),))
    (stored,) = await stores.tasks.enqueue("b", [downstream], now)
    assert stored.state is TaskState.WAITING
    await deps.link("b", [(downstream.id, "a", upstream.id)], now)
    assert await stores.redis.zcard(QueueKeys.of("b").links) == 0
    assert await run_all(stores, "a") == [upstream.id]
    assert await state(stores, downstream.id, "b") is TaskState.WAITING
    assert await deps.deliver("a", now) == 1
    assert await deps.deliver("a", now) == 0  # delivered once, then dropped
    assert await state(stores, downstream.id, "b") is TaskState.QUEUED


async def test_linking_to_a_task_that_ended_already_settles_at_once(stores: Stores) -> None:
    await queue(stores, "a")
    await queue(stores, "b")
    deps = DependencyStore(stores.redis, Scripts(stores.redis))
    now = stores.clock.now_ms()
    upstream = task(now)
    await stores.tasks.enqueue("a", [upstream], now)
    await run_all(stores, "a")
    downstream = task(now, depends_on=(upstream.id,), cross_deps=(("a", upstream.id),))
    await stores.tasks.enqueue("b", [downstream], now)
    # A gateway that stopped before linking: the recoverer links it later.
    assert await deps.relink("b", now, now) == 1
    assert await state(stores, downstream.id, "b") is TaskState.QUEUED


# --- dedup and singleton keys --------------------------------------------------------------


async def test_a_dedup_key_returns_the_first_task_within_the_window(stores: Stores) -> None:
    await queue(stores, dedup_window=60)
    now = stores.clock.now_ms()
    first = task(now, dedup_key="k")
    (a,) = await stores.tasks.enqueue("q", [first], now)
    (b,) = await stores.tasks.enqueue("q", [task(now, dedup_key="k")], now)
    assert a.state is TaskState.QUEUED
    assert b.duplicate_of == first.id
    await run_all(stores)  # finished tasks still count
    (c,) = await stores.tasks.enqueue("q", [task(now, dedup_key="k")], now + 59_000)
    assert c.duplicate_of == first.id
    later = task(now + 61_000, dedup_key="k")
    (d,) = await stores.tasks.enqueue("q", [later], now + 61_000)
    assert d.state is TaskState.QUEUED


async def test_a_singleton_key_holds_one_waiting_task_until_it_runs(stores: Stores) -> None:
    await queue(stores)
    now = stores.clock.now_ms()
    first = task(now, singleton_key="nightly")
    await stores.tasks.enqueue("q", [first], now)
    (again,) = await stores.tasks.enqueue("q", [task(now, singleton_key="nightly")], now)
    assert again.duplicate_of == first.id
    claim = await stores.tasks.claim("q", 10, "s", now)
    assert [x.task_id for x in claim.leases] == [first.id]
    second = task(now, singleton_key="nightly")
    (stored,) = await stores.tasks.enqueue("q", [second], now)
    assert stored.state is TaskState.QUEUED


async def test_a_dependency_on_a_deduplicated_member_waits_for_the_task_it_matched(
    stores: Stores,
) -> None:
    """A batch member that a dedup or singleton key matches to an earlier task is that task, so
    a member depending on it waits for the earlier task (the script used to fail on the
    member's missing record)."""
    await queue(stores, dedup_window=60)
    now = stores.clock.now_ms()
    earlier = task(now, dedup_key="k")
    nightly = task(now, singleton_key="nightly")
    await stores.tasks.enqueue("q", [earlier, nightly], now)
    again = task(now, dedup_key="k")
    once_more = task(now, singleton_key="nightly")
    after = task(now, depends_on=(again.id, once_more.id))
    stored = await stores.tasks.enqueue("q", [again, once_more, after], now)
    assert [x.duplicate_of for x in stored] == [earlier.id, nightly.id, None]
    assert stored[2].state is TaskState.WAITING
    assert sorted(await run_all(stores)) == sorted([earlier.id, nightly.id])
    assert await run_all(stores) == [after.id]


# --- capabilities ----------------------------------------------------------------------------


async def test_only_endpoints_with_the_capability_receive_its_tasks(stores: Stores) -> None:
    await queue(stores, caps=([], ["gpu"]))
    now = stores.clock.now_ms()
    gpu = [task(now, capability="gpu") for _ in range(3)]
    plain = [task(now) for _ in range(3)]
    tpu = task(now, capability="tpu")
    await stores.tasks.enqueue("q", [*gpu, tpu, *plain], now)
    claim = await stores.tasks.claim("q", 100, "s", now)
    by_task = {x.task_id: x.endpoint_id for x in claim.leases}
    assert {by_task[t.id] for t in gpu} == {"ep1"}
    assert set(by_task) == {t.id for t in [*gpu, *plain]}
    assert tpu.id not in by_task
    assert await stores.redis.smembers(QueueKeys.of("q").capabilities) == {"gpu", "tpu"}
    assert await stores.tasks.unroutable("q", {"gpu"}) == {"tpu": 1}


# --- rate limit and circuit breaker ------------------------------------------------------------


async def test_the_rate_limit_is_a_token_bucket_on_the_redis_clock(stores: Stores) -> None:
    await queue(stores, rate_limit=RateLimit(per_second=10, burst=3))
    now = stores.clock.now_ms()
    await stores.tasks.enqueue("q", [task(now) for _ in range(20)], now)
    first = await stores.tasks.claim("q", 100, "s", now)
    assert len(first.leases) == 3  # the burst
    limited = await stores.tasks.claim("q", 100, "s", now)
    assert limited.status is ClaimStatus.RATE
    assert not limited.held  # the queue's own bucket: new work cannot go sooner
    assert limited.retry_at_ms == now + 100
    later = await stores.tasks.claim("q", 100, "s", now + 500)
    assert len(later.leases) == 3  # 5 tokens accrued, capped at the burst


async def test_a_failing_endpoint_opens_its_circuit_and_is_probed(stores: Stores) -> None:
    breaker = CircuitBreaker(failures=3, open_for=1, max_open_for=10)
    await queue(stores, caps=([],), circuit_breaker=breaker)
    now = stores.clock.now_ms()
    await stores.tasks.enqueue("q", [task(now) for _ in range(10)], now)
    await run_all_one_at_a_time(stores, 3, AttemptOutcome.ERROR)
    endpoint = json.loads(await stores.redis.hget(QueueKeys.of("q").health, "ep0"))
    assert endpoint["open_until"] == now + 1000
    blocked = await stores.tasks.claim("q", 10, "s", now)
    assert blocked.status is ClaimStatus.NOENDPOINT
    assert blocked.retry_at_ms == now + 1000
    # Half open: one probe only; its failure doubles the pause.
    probe = await stores.tasks.claim("q", 10, "s", now + 1000)
    assert len(probe.leases) == 1
    assert (await stores.tasks.claim("q", 10, "s", now + 1000)).status is ClaimStatus.NOENDPOINT
    (lease,) = probe.leases
    await stores.tasks.finish(
        "q", Finish(lease.task_id, lease.token, AttemptOutcome.ERROR), now + 1000
    )
    endpoint = json.loads(await stores.redis.hget(QueueKeys.of("q").health, "ep0"))
    assert endpoint["open_until"] == now + 3000
    # A successful probe closes it.
    (lease,) = (await stores.tasks.claim("q", 10, "s", now + 3000)).leases
    await stores.tasks.finish(
        "q", Finish(lease.task_id, lease.token, AttemptOutcome.SUCCEEDED, text="1"), now + 3000
    )
    assert len((await stores.tasks.claim("q", 10, "s", now + 3000)).leases) > 1


async def run_all_one_at_a_time(s: Stores, count: int, outcome: AttemptOutcome) -> None:
    for _ in range(count):
        (lease,) = (await s.tasks.claim("q", 1, "s", s.clock.now_ms())).leases
        await s.tasks.finish("q", Finish(lease.task_id, lease.token, outcome), s.clock.now_ms())


# --- stalls ------------------------------------------------------------------------------------


async def test_a_task_without_heartbeats_is_listed_as_stalled(stores: Stores) -> None:
    await queue(stores, max_heartbeat_interval=2)
    now = stores.clock.now_ms()
    quiet = task(now, heartbeat_ms=500)
    chatty = task(now)
    await stores.tasks.enqueue("q", [quiet, chatty], now)
    claim = await stores.tasks.claim("q", 10, "s", now)
    token = {x.task_id: x.token for x in claim.leases}
    await stores.tasks.heartbeat("q", chatty.id, token[chatty.id], now + 1500)
    stalled = await stores.tasks.stalled("q", now + 1900, 10)
    assert [x.task_id for x in stalled] == [quiet.id]
    later = await stores.tasks.stalled("q", now + 3600, 10)
    assert {x.task_id for x in later} == {quiet.id, chatty.id}
    # A stall ends the attempt only while it lasts (fenced like an expiry).
    await stores.tasks.heartbeat("q", quiet.id, token[quiet.id], now + 3600)
    done = await stores.tasks.finish(
        "q", Finish(quiet.id, token[quiet.id], AttemptOutcome.STALLED), now + 3700
    )
    assert done.fence.value == "ALIVE"
    done = await stores.tasks.finish(
        "q", Finish(chatty.id, token[chatty.id], AttemptOutcome.STALLED), now + 3700
    )
    assert done.state is TaskState.QUEUED


async def test_the_recoverer_redispatches_stalled_tasks_by_policy(stores: Stores) -> None:
    await queue(
        stores,
        max_heartbeat_interval=1,
        stall_policy="redispatch",
        backoff={"strategy": "constant", "base_delay": 0},
    )
    now = stores.clock.now_ms()
    stuck = task(now)
    await stores.tasks.enqueue("q", [stuck], now)
    await stores.tasks.claim("q", 10, "s", now)
    rec = Recoverer(stores.tasks, stores.queues, stores.clock)
    assert (await rec.step(now + 900)).stalled == 0
    report = await rec.step(now + 1001)
    assert report.stalled == 1
    assert report.retried == 1
    record = await stores.tasks.record("q", stuck.id)
    assert record is not None
    assert record["state"] == "queued"
    assert record["error"] == "heartbeats stopped"
