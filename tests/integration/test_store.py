"""The Lua state changes against a real Redis, one step at a time with a manual clock."""

from __future__ import annotations

import json
import secrets

import pytest
from ulid import ULID

from gateway.core.errors import QueueNotEmpty, QueueNotFound, TaskExists
from gateway.store import keys
from gateway.store.endpoint_records import EndpointRecord
from gateway.store.keys import QueueKeys
from gateway.store.records import NewTask
from gateway.store.tasks import CancelResult, ClaimStatus, Fence, Finish, Stored
from sdk.wire import AttemptOutcome, Backoff, BackoffStrategy, QueuePolicy, TaskState
from tests.support import until

from .conftest import Stores


def new_task(now: int, *, priority: int = 0, run_at: int | None = None, **kw: object) -> NewTask:
    return NewTask(
        id=str(ULID()),
        name="t",
        payload_json='{"args": [], "kwargs": {}}',
        priority=priority,
        created_ms=now,
        run_at_ms=now if run_at is None else run_at,
        **kw,  # type: ignore[arg-type]
    )


def seed() -> str:
    return secrets.token_hex(16)


async def setup_queue(s: Stores, policy: QueuePolicy | None = None, concurrency: int = 10) -> None:
    await s.queues.put("q", policy or QueuePolicy(), s.clock.now_ms())
    await s.queues.add_endpoint(
        EndpointRecord(
            id="ep1",
            queue="q",
            url="http://127.0.0.1:1/",
            concurrency=concurrency,
            capabilities=[],
            secrets=["whsec_x"],
            created_ms=s.clock.now_ms(),
        )
    )


async def test_enqueue_refuses_unknown_queue_and_stores_nothing(stores: Stores) -> None:
    with pytest.raises(QueueNotFound):
        await stores.tasks.enqueue("nope", [new_task(stores.clock.now_ms())], stores.clock.now_ms())
    assert await stores.redis.keys("*") == []


async def test_claim_orders_by_priority_then_run_at_then_fifo(stores: Stores) -> None:
    await setup_queue(stores)
    now = stores.clock.now_ms()
    low = new_task(now, priority=-5)
    first = new_task(now)
    second = new_task(now)
    earlier = new_task(now, run_at=now - 1000)
    high = new_task(now, priority=7)
    for t in (low, first, second, earlier, high):
        await stores.tasks.enqueue("q", [t], now)
    claim = await stores.tasks.claim("q", 5, seed(), now)
    assert claim.status is ClaimStatus.OK
    assert [lease.task_id for lease in claim.leases] == [
        high.id,
        earlier.id,
        first.id,
        second.id,
        low.id,
    ]


async def test_claim_respects_queue_and_endpoint_concurrency(stores: Stores) -> None:
    await setup_queue(stores, QueuePolicy(max_concurrency=3), concurrency=2)
    now = stores.clock.now_ms()
    await stores.tasks.enqueue("q", [new_task(now) for _ in range(5)], now)
    claim = await stores.tasks.claim("q", 5, seed(), now)
    assert len(claim.leases) == 2
    assert (await stores.tasks.claim("q", 5, seed(), now)).status is ClaimStatus.NOENDPOINT
    await stores.queues.add_endpoint(
        EndpointRecord(
            id="ep2",
            queue="q",
            url="http://127.0.0.1:2/",
            concurrency=5,
            capabilities=[],
            secrets=["whsec_y"],
            created_ms=now,
        )
    )
    claim2 = await stores.tasks.claim("q", 5, seed(), now)
    assert [lease.endpoint_id for lease in claim2.leases] == ["ep2"]
    assert (await stores.tasks.claim("q", 5, seed(), now)).status is ClaimStatus.FULL


async def test_success_is_fenced_by_the_lease_token(stores: Stores) -> None:
    await setup_queue(stores)
    now = stores.clock.now_ms()
    task = new_task(now)
    await stores.tasks.enqueue("q", [task], now)
    (lease,) = (await stores.tasks.claim("q", 1, seed(), now)).leases
    wrong = Finish(task.id, "not-the-token", AttemptOutcome.SUCCEEDED, text='"x"')
    assert (await stores.tasks.finish("q", wrong, now)).fence is Fence.STALE
    right = Finish(task.id, lease.token, AttemptOutcome.SUCCEEDED, http_status=200, text='"ok"')
    done = await stores.tasks.finish("q", right, now + 5)
    assert (done.fence, done.state) == (Fence.OK, TaskState.SUCCEEDED)
    again = await stores.tasks.finish("q", right, now + 6)
    assert (again.fence, again.state) == (Fence.STALE, TaskState.SUCCEEDED)
    read = await stores.tasks.read("q", task.id)
    assert read is not None
    _, _, result, _, history = read
    assert result == '"ok"'
    assert len(history) == 1
    k = QueueKeys.of("q")
    assert await stores.redis.zcard(k.running) == 0
    assert await stores.redis.hget(k.inflight, "ep1") == "0"


async def test_expired_lease_retries_with_delay_then_dead_letters(stores: Stores) -> None:
    policy = QueuePolicy(
        max_attempts=2, lease_timeout=10, backoff=Backoff(strategy=BackoffStrategy.CONSTANT)
    )
    await setup_queue(stores, policy)
    now = stores.clock.now_ms()
    task = new_task(now)
    await stores.tasks.enqueue("q", [task], now)
    (lease,) = (await stores.tasks.claim("q", 1, seed(), now)).leases
    # The endpoint accepted it (202), then went silent.
    await stores.tasks.accept_many("q", [(task.id, lease.token)], now)
    assert await stores.tasks.expired("q", now + 9_999, 10) == []
    (exp,) = await stores.tasks.expired("q", now + 10_000, 10)
    done = await stores.tasks.finish(
        "q", Finish(task.id, exp.token, AttemptOutcome.EXPIRED, delay_ms=500), now + 10_000
    )
    assert (done.state, done.due_ms) == (TaskState.SCHEDULED, now + 10_500)
    assert await stores.tasks.promote("q", now + 10_499, 100) == 0
    assert await stores.tasks.promote("q", now + 10_500, 100) == 1
    (lease,) = (await stores.tasks.claim("q", 1, seed(), now + 10_600)).leases
    assert lease.attempt == 2
    await stores.tasks.accept_many("q", [(task.id, lease.token)], now + 10_600)
    (exp,) = await stores.tasks.expired("q", now + 30_000, 10)
    done = await stores.tasks.finish(
        "q", Finish(task.id, exp.token, AttemptOutcome.EXPIRED), now + 30_000
    )
    assert done.state is TaskState.DEAD


async def test_heartbeat_extends_lease_but_not_past_the_deadline(stores: Stores) -> None:
    await setup_queue(stores, QueuePolicy(lease_timeout=10, max_run_time=25))
    now = stores.clock.now_ms()
    task = new_task(now)
    await stores.tasks.enqueue("q", [task], now)
    (lease,) = (await stores.tasks.claim("q", 1, seed(), now)).leases
    assert lease.expires_ms == now + 10_000
    hb = await stores.tasks.heartbeat("q", task.id, lease.token, now + 8_000)
    assert (hb.fence, hb.expires_ms) == (Fence.OK, now + 18_000)
    hb = await stores.tasks.heartbeat("q", task.id, lease.token, now + 20_000)
    assert hb.expires_ms == now + 25_000
    stale = await stores.tasks.heartbeat("q", task.id, "bad", now + 20_000)
    assert stale.fence is Fence.STALE
    # An expiry that races a heartbeat changes nothing.
    alive = await stores.tasks.finish(
        "q", Finish(task.id, lease.token, AttemptOutcome.EXPIRED), now + 24_000
    )
    assert alive.fence is Fence.ALIVE


async def test_busy_and_gone_do_not_spend_attempts(stores: Stores) -> None:
    await setup_queue(stores, QueuePolicy(max_attempts=1))
    now = stores.clock.now_ms()
    task = new_task(now)
    await stores.tasks.enqueue("q", [task], now)
    (lease,) = (await stores.tasks.claim("q", 1, seed(), now)).leases
    busy = Finish(task.id, lease.token, AttemptOutcome.BUSY, http_status=503, delay_ms=1000)
    assert (await stores.tasks.finish("q", busy, now)).state is TaskState.SCHEDULED
    await stores.tasks.promote("q", now + 1000, 10)
    (lease,) = (await stores.tasks.claim("q", 1, seed(), now + 1000)).leases
    assert lease.attempt == 1
    gone = Finish(task.id, lease.token, AttemptOutcome.GONE, http_status=410)
    assert (await stores.tasks.finish("q", gone, now + 1001)).state is TaskState.QUEUED
    (listed,) = await stores.queues.endpoints("q")
    assert listed.in_flight == 0
    assert not listed.record.enabled
    assert (await stores.tasks.claim("q", 1, seed(), now + 1002)).status is ClaimStatus.NOENDPOINT


async def test_cancel(stores: Stores) -> None:
    await setup_queue(stores)
    now = stores.clock.now_ms()
    queued, running, later = new_task(now), new_task(now), new_task(now, run_at=now + 60_000)
    await stores.tasks.enqueue("q", [running], now)
    (lease,) = (await stores.tasks.claim("q", 1, seed(), now)).leases
    await stores.tasks.enqueue("q", [queued, later], now)
    assert await stores.tasks.cancel("q", queued.id, now) is CancelResult.CANCELLED
    assert await stores.tasks.cancel("q", later.id, now) is CancelResult.CANCELLED
    assert await stores.tasks.cancel("q", running.id, now) is CancelResult.REQUESTED
    hb = await stores.tasks.heartbeat("q", running.id, lease.token, now)
    assert hb.cancel_requested
    # The worker never answers: the expiry ends it as cancelled, not retried.
    (exp,) = await stores.tasks.expired("q", now + 60_000, 10)
    done = await stores.tasks.finish(
        "q", Finish(running.id, exp.token, AttemptOutcome.EXPIRED), now + 60_000
    )
    assert done.state is TaskState.CANCELLED
    assert await stores.tasks.cancel("q", running.id, now) is CancelResult.FINISHED
    assert (await stores.tasks.claim("q", 1, seed(), now)).status is ClaimStatus.EMPTY


async def test_a_queued_record_keeps_its_place_as_a_sequence_number(stores: Stores) -> None:
    """The ready-set member is made again from the record (prio, run_at, sn); records stored
    before that carry the member itself (m), and both leave the ready set when cancelled."""
    await setup_queue(stores)
    now = stores.clock.now_ms()
    new, old = new_task(now, priority=3), new_task(now)
    await stores.tasks.enqueue("q", [new, old], now)
    k = QueueKeys.of("q")
    members = {m[-26:]: m for m in await stores.redis.zrange(k.ready, 0, -1)}
    record = json.loads(await stores.redis.hget(k.meta, new.id))
    assert "m" not in record
    assert isinstance(record["sn"], int)
    stored_before = json.loads(await stores.redis.hget(k.meta, old.id))
    del stored_before["sn"]
    stored_before["m"] = members[old.id]
    await stores.redis.hset(k.meta, old.id, json.dumps(stored_before))
    for task in (new, old):
        assert await stores.tasks.cancel("q", task.id, now) is CancelResult.CANCELLED
    assert await stores.redis.zcard(k.ready) == 0
    for task in (new, old):
        record = json.loads(await stores.redis.hget(k.meta, task.id))
        assert "m" not in record
        assert "sn" not in record


async def test_tasks_stored_in_the_previous_layout_are_claimed_retried_and_finished(
    stores: Stores,
) -> None:
    """A record is stored without its fields at their default (att, hist, prio 0, created equal
    to run_at, state queued) and a task without a payload stores none. Tasks stored before that
    (every field, a 'null' payload, the ready member in the record) run to the end as before."""
    await setup_queue(stores)
    now = stores.clock.now_ms()
    old = new_task(now)
    fresh = NewTask(
        id=str(ULID()), name="t", payload_json="null", priority=0, created_ms=now, run_at_ms=now
    )
    await stores.tasks.enqueue("q", [old, fresh], now)
    k = QueueKeys.of("q")
    assert json.loads(await stores.redis.hget(k.meta, fresh.id)) == {
        "name": "t",
        "run_at": now,
        "sn": 2,
    }
    assert await stores.redis.hexists(k.payload, fresh.id) == 0
    (member,) = [m for m in await stores.redis.zrange(k.ready, 0, -1) if m.endswith(old.id)]
    previous = {"name": "t", "prio": 0, "created": now, "run_at": now, "att": 0, "hist": 0}
    await stores.redis.hset(
        k.meta, old.id, json.dumps({**previous, "state": "queued", "m": member})
    )
    await stores.redis.hset(k.payload, old.id, "null")

    claim = await stores.tasks.claim("q", 2, seed(), now)
    assert [(lease.task_id, lease.attempt, lease.payload_json) for lease in claim.leases] == [
        (old.id, 1, "null"),
        (fresh.id, 1, "null"),
    ]
    ends = [
        Finish(lease.task_id, lease.token, AttemptOutcome.ERROR, 500, "boom", delay_ms=1000)
        for lease in claim.leases
    ]
    assert [d.state for d in await stores.tasks.finish_many("q", ends, now)] == [
        TaskState.SCHEDULED
    ] * 2
    assert await stores.tasks.promote("q", now + 1000, 10) == 2
    claim = await stores.tasks.claim("q", 2, seed(), now + 1000)
    assert {(lease.task_id, lease.attempt) for lease in claim.leases} == {
        (old.id, 2),
        (fresh.id, 2),
    }
    ends = [
        Finish(lease.task_id, lease.token, AttemptOutcome.SUCCEEDED, 200, "1")
        for lease in claim.leases
    ]
    done = await stores.tasks.finish_many("q", ends, now + 1000)
    assert {(d.state, d.created_ms) for d in done} == {(TaskState.SUCCEEDED, now)}
    for task in (old, fresh):
        found = await stores.tasks.read("q", task.id)
        assert found is not None
        record, payload, result, _, history = found
        assert (record["att"], record["hist"], record["prio"], record["created"]) == (2, 2, 0, now)
        assert (payload, result, len(history)) == (None if task is fresh else "null", "1", 2)
        stored = json.loads(await stores.redis.hget(k.meta, task.id))
        assert "m" not in stored
        assert "prio" not in stored
        assert (stored["att"], stored["created"], stored["run_at"]) == (2, now, now + 1000)


async def test_a_claim_says_when_nothing_more_can_go_until_something_changes(
    stores: Stores,
) -> None:
    await setup_queue(stores, concurrency=3)
    now = stores.clock.now_ms()
    await stores.tasks.enqueue("q", [new_task(now) for _ in range(5)], now)
    # Two asked, two taken: more may go at once.
    first = await stores.tasks.claim("q", 2, seed(), now)
    assert (len(first.leases), first.settled) == (2, False)
    # The endpoint has room for one more: taken, and then it is full.
    second = await stores.tasks.claim("q", 10, seed(), now)
    assert (len(second.leases), second.settled) == (1, True)
    assert (await stores.tasks.claim("q", 10, seed(), now)).status is ClaimStatus.NOENDPOINT


async def test_a_claim_that_took_the_last_ready_task_is_settled(stores: Stores) -> None:
    await setup_queue(stores)
    now = stores.clock.now_ms()
    await stores.tasks.enqueue("q", [new_task(now)], now)
    claim = await stores.tasks.claim("q", 10, seed(), now)
    assert (len(claim.leases), claim.settled) == (1, True)


async def test_a_claim_that_took_as_many_as_it_asked_and_left_none_is_settled(
    stores: Stores,
) -> None:
    """A pull poll for one task that took the last one must not hand a wake-up on (or a
    dispatcher claim again) only to find nothing."""
    await setup_queue(stores)
    now = stores.clock.now_ms()
    await stores.tasks.enqueue("q", [new_task(now) for _ in range(2)], now)
    first = await stores.tasks.claim("q", 1, seed(), now)
    assert (len(first.leases), first.settled) == (1, False)
    second = await stores.tasks.claim("q", 1, seed(), now)
    assert (len(second.leases), second.settled) == (1, True)


async def test_an_enqueue_into_an_empty_ready_set_announces_how_many_became_ready(
    stores: Stores,
) -> None:
    await setup_queue(stores)
    now = stores.clock.now_ms()
    async with stores.redis.pubsub() as pubsub:
        await pubsub.subscribe(keys.WAKE_CHANNEL)
        first = await stores.tasks.enqueue_batch("q", [new_task(now) for _ in range(3)], now)
        scheduled = new_task(now, run_at=now + 60_000)
        second = await stores.tasks.enqueue_batch("q", [new_task(now), scheduled], now)
        await stores.redis.publish(keys.WAKE_CHANNEL, "marker")
        heard: list[str] = []

        async def marker_heard() -> bool:
            message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=0.05)
            if message is not None:
                heard.append(message["data"])
            return "marker" in heard

        await until(marker_heard, what="the marker")
    assert (first.announced, second.announced) == (True, False)
    assert [s.state for s in second.stored] == [TaskState.QUEUED, TaskState.SCHEDULED]
    # The second enqueue found tasks ready already: no message (the polls awake see them).
    assert heard == ["q 3", "marker"]


async def test_duplicate_ids_are_refused_across_queues(stores: Stores) -> None:
    await setup_queue(stores)
    await stores.queues.put("other", QueuePolicy(), stores.clock.now_ms())
    now = stores.clock.now_ms()
    task = new_task(now)
    await stores.tasks.enqueue("q", [task], now, client_ids=True)
    with pytest.raises(TaskExists):
        await stores.tasks.enqueue("other", [task], now, client_ids=True)
    with pytest.raises(TaskExists):
        await stores.tasks.enqueue("q", [task], now, client_ids=True)
    assert await stores.tasks.locate(task.id) == "q"
    assert await stores.redis.hlen(QueueKeys.of("other").meta) == 0


async def test_an_enqueue_sent_again_after_its_answer_was_lost_answers_what_it_stored(
    stores: Stores,
) -> None:
    """Ids the gateway made are unique: finding them stored means the script ran before and
    its answer was lost (redis-py's cluster pipeline re-sends a command that met a failover).
    That answers as stored, keeping the index, instead of 409 for the enqueue's own tasks."""
    await setup_queue(stores)
    now = stores.clock.now_ms()
    tasks = [new_task(now), new_task(now, run_at=now + 60_000)]
    first = await stores.tasks.enqueue("q", tasks, now)
    again = await stores.tasks.enqueue("q", tasks, now)
    assert again == first == [Stored(TaskState.QUEUED), Stored(TaskState.SCHEDULED)]
    assert [await stores.tasks.locate(t.id) for t in tasks] == ["q", "q"]
    assert await stores.redis.hlen(QueueKeys.of("q").meta) == 2
    # Not when only some of them are there: that is no earlier run of this enqueue.
    with pytest.raises(TaskExists):
        await stores.tasks.enqueue("q", [tasks[0], new_task(now)], now)


async def test_a_throttle_delayed_enqueue_sent_again_answers_with_its_record(
    stores: Stores,
) -> None:
    """The answer of an enqueue found stored is built from the records found: a task its
    throttle delayed answers with the run_at it was delayed to, not the one it was sent with."""
    await setup_queue(stores)
    now = stores.clock.now_ms()
    tasks = [new_task(now, throttle=("k", 60_000, 1, True)) for _ in range(2)]
    first = await stores.tasks.enqueue("q", tasks, now)
    again = await stores.tasks.enqueue("q", tasks, now)
    assert first[1].delayed_to == now + 60_000
    assert again == first
    assert [s.record is not None and s.record["run_at"] for s in again] == [now, now + 60_000]
    assert again[1].record is not None
    assert again[1].record["thd"] == 1


async def test_sweep_and_delete_leave_no_keys(stores: Stores) -> None:
    await setup_queue(stores, QueuePolicy(retention_succeeded=60))
    now = stores.clock.now_ms()
    task = new_task(now)
    await stores.tasks.enqueue("q", [task], now)
    (lease,) = (await stores.tasks.claim("q", 1, seed(), now)).leases
    await stores.tasks.append_log("q", task.id, lease.token, ['{"message":"hi"}'])
    await stores.tasks.finish(
        "q", Finish(task.id, lease.token, AttemptOutcome.SUCCEEDED, text="1"), now
    )
    assert await stores.tasks.sweep("q", now + 59_999, 100) == 0
    assert await stores.tasks.sweep("q", now + 60_000, 100) == 1
    pending = new_task(now)
    await stores.tasks.enqueue("q", [pending], now)
    with pytest.raises(QueueNotEmpty):
        await stores.queues.delete("q", force=False)
    ids = await stores.queues.delete("q", force=True)
    await stores.tasks.forget("q", ids)
    assert await stores.redis.keys("*") == []


async def test_finishes_in_one_call_are_fenced_one_by_one(stores: Stores) -> None:
    await setup_queue(stores)
    now = stores.clock.now_ms()
    a, b = new_task(now), new_task(now)
    await stores.tasks.enqueue("q", [a, b], now)
    leases = {
        lease.task_id: lease for lease in (await stores.tasks.claim("q", 2, seed(), now)).leases
    }
    done = await stores.tasks.finish_many(
        "q",
        [
            Finish(a.id, "stale-token", AttemptOutcome.SUCCEEDED, text="1"),
            Finish(b.id, leases[b.id].token, AttemptOutcome.SUCCEEDED, text="2"),
            Finish(a.id, leases[a.id].token, AttemptOutcome.FAILED, text="no"),
        ],
        now,
    )
    assert [(d.fence, d.state) for d in done] == [
        (Fence.STALE, TaskState.RUNNING),
        (Fence.OK, TaskState.SUCCEEDED),
        (Fence.OK, TaskState.DEAD),
    ]


async def test_one_task_ended_twice_in_one_call_ends_once(stores: Stores) -> None:
    """The finish script writes its changes after the last end of the call; the second end of
    the same attempt must still see the first."""
    await setup_queue(stores)
    now = stores.clock.now_ms()
    a = new_task(now)
    await stores.tasks.enqueue("q", [a], now)
    (lease,) = (await stores.tasks.claim("q", 1, seed(), now)).leases
    done = await stores.tasks.finish_many(
        "q",
        [
            Finish(a.id, lease.token, AttemptOutcome.SUCCEEDED, text="1"),
            Finish(a.id, lease.token, AttemptOutcome.ERROR, text="late", delay_ms=5),
        ],
        now,
    )
    assert [(d.fence, d.state) for d in done] == [
        (Fence.OK, TaskState.SUCCEEDED),
        (Fence.STALE, TaskState.SUCCEEDED),
    ]
    k = QueueKeys.of("q")
    assert await stores.redis.hget(k.result, a.id) == "1"
    assert await stores.redis.hkeys(k.attempts) == [f"{a.id}:1"]
    assert await stores.redis.zcard(k.running) == 0
    assert await stores.redis.hget(k.inflight, "ep1") == "0"
    assert await stores.redis.zscore(k.succeeded, a.id) == now


async def test_scripts_refuse_a_task_whose_queue_policy_is_gone(stores: Stores) -> None:
    """A task left without its queue's policy (never made by the gateway, but Redis state can be
    damaged by hand): every lease-fenced script answers NOQUEUE and changes nothing, rather than
    failing on a missing policy."""
    await setup_queue(stores)
    now = stores.clock.now_ms()
    task, queued = new_task(now), new_task(now)
    await stores.tasks.enqueue("q", [task, queued], now)
    (lease,) = (await stores.tasks.claim("q", 1, seed(), now)).leases
    await stores.redis.hdel(QueueKeys.of("q").policy, "policy")
    before = {k: await stores.redis.dump(k) for k in sorted(await stores.redis.keys("*"))}

    hb = await stores.tasks.heartbeat("q", task.id, lease.token, now)
    logged = await stores.tasks.append_log("q", task.id, lease.token, ['{"message":"hi"}'])
    done = await stores.tasks.finish(
        "q", Finish(task.id, lease.token, AttemptOutcome.SUCCEEDED, text="1"), now
    )
    cancelled = await stores.tasks.cancel("q", queued.id, now)

    assert (hb.fence, logged, done.fence) == (Fence.NOQUEUE,) * 3
    assert cancelled is CancelResult.NOQUEUE
    after = {k: await stores.redis.dump(k) for k in sorted(await stores.redis.keys("*"))}
    assert after == before


async def test_a_first_attempt_stores_its_start_once_and_older_records_still_finish(
    stores: Stores,
) -> None:
    """A claimed record leaves out ``started`` while it equals ``first`` (the first attempt);
    a retry's record keeps both. Records stored with both (before that) claim, retry and finish
    as before, and every reader sees ``started``."""
    await setup_queue(stores)
    now = stores.clock.now_ms()
    old, fresh = new_task(now), new_task(now)
    await stores.tasks.enqueue("q", [old, fresh], now)
    k = QueueKeys.of("q")
    claim = await stores.tasks.claim("q", 2, seed(), now)
    assert [lease.started_ms for lease in claim.leases] == [now, now]
    for lease in claim.leases:
        stored = json.loads(await stores.redis.hget(k.meta, lease.task_id))
        assert (stored["first"], "started" in stored) == (now, False)
    # The old task's record as an earlier version stored it: started beside first.
    stored = json.loads(await stores.redis.hget(k.meta, old.id))
    await stores.redis.hset(k.meta, old.id, json.dumps({**stored, "started": now}))
    found = await stores.tasks.read("q", fresh.id)
    assert found is not None
    assert found[0]["started"] == now
    ends = [
        Finish(lease.task_id, lease.token, AttemptOutcome.ERROR, 500, "boom", delay_ms=1000)
        for lease in claim.leases
    ]
    assert [d.started_ms for d in await stores.tasks.finish_many("q", ends, now)] == [now, now]
    assert await stores.tasks.promote("q", now + 1000, 10) == 2
    claim = await stores.tasks.claim("q", 2, seed(), now + 1000)
    for lease in claim.leases:
        stored = json.loads(await stores.redis.hget(k.meta, lease.task_id))
        assert (stored["first"], stored["started"]) == (now, now + 1000)
    ends = [
        Finish(lease.task_id, lease.token, AttemptOutcome.SUCCEEDED, 200, "1")
        for lease in claim.leases
    ]
    done = await stores.tasks.finish_many("q", ends, now + 1000)
    assert {(d.state, d.started_ms) for d in done} == {(TaskState.SUCCEEDED, now + 1000)}
    for task in (old, fresh):
        found = await stores.tasks.read("q", task.id)
        assert found is not None
        assert (found[0]["first"], found[0]["started"], found[0]["att"]) == (now, now + 1000, 2)


async def test_a_plain_task_is_stored_as_sent_and_an_older_gateways_record_reads_the_same(
    stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The enqueue stores a plain task's record JSON as the gateway sent it (prio 0 and created
    equal to run_at left out), with its sequence number or scheduled state added. A record sent
    whole, as a gateway before that sends it, is stored and runs the same."""
    await setup_queue(stores)
    now = stores.clock.now_ms()
    queued, later = new_task(now), new_task(now, run_at=now + 5_000)
    await stores.tasks.enqueue("q", [queued, later], now)
    k = QueueKeys.of("q")
    assert await stores.redis.hget(k.meta, queued.id) == (f'{{"name":"t","run_at":{now},"sn":1}}')
    assert await stores.redis.hget(k.meta, later.id) == (
        f'{{"name":"t","created":{now},"run_at":{now + 5_000},"state":"scheduled"}}'
    )
    monkeypatch.setattr(NewTask, "record_json", lambda self: json.dumps(self.record()))
    whole = new_task(now, priority=0)
    await stores.tasks.enqueue("q", [whole], now)
    assert json.loads(await stores.redis.hget(k.meta, whole.id)) == {
        "name": "t",
        "prio": 0,
        "created": now,
        "run_at": now,
        "sn": 2,
    }
    claim = await stores.tasks.claim("q", 5, seed(), now)
    assert [lease.task_id for lease in claim.leases] == [queued.id, whole.id]
    ends = [
        Finish(lease.task_id, lease.token, AttemptOutcome.SUCCEEDED, 200, "1")
        for lease in claim.leases
    ]
    assert [d.state for d in await stores.tasks.finish_many("q", ends, now)] == [
        TaskState.SUCCEEDED
    ] * 2
    found = await stores.tasks.read("q", whole.id)
    assert found is not None
    assert (found[0]["prio"], found[0]["created"], found[0]["state"]) == (0, now, "succeeded")


async def test_a_claim_reads_members_in_chunks_and_skips_those_without_a_record(
    stores: Stores,
) -> None:
    """The claim reads the ready set and the records a chunk at a time: a member whose record
    is gone is dropped, the claim takes the next ones in order, across more than one chunk."""
    await setup_queue(stores, concurrency=20)
    now = stores.clock.now_ms()
    tasks = [new_task(now) for _ in range(12)]
    await stores.tasks.enqueue("q", tasks, now)
    k = QueueKeys.of("q")
    await stores.redis.hdel(k.meta, tasks[1].id, tasks[4].id)
    first = await stores.tasks.claim("q", 4, seed(), now)
    assert [lease.task_id for lease in first.leases] == [
        t.id for t in (tasks[0], *tasks[2:4], tasks[5])
    ]
    assert not first.settled
    rest = await stores.tasks.claim("q", 20, seed(), now)
    assert [lease.task_id for lease in rest.leases] == [t.id for t in tasks[6:]]
    assert rest.settled
    assert await stores.redis.zcard(k.ready) == 0
