"""Operator tools against a real Redis, with a manual clock: dead-letter search and resubmit,
scheduled and running tasks, cleaning, and the retention sweep's defaults."""

from __future__ import annotations

import json
import secrets
from datetime import timedelta

import pytest
from pydantic import ValidationError
from ulid import ULID

from gateway.core.errors import QueueNotFound, ValidationFailed
from gateway.services.operations import OperationsService, decode_cursor, encode_cursor
from gateway.store import keys
from gateway.store.endpoint_records import EndpointRecord
from gateway.store.keys import QueueKeys
from gateway.store.operations import OperationsStore, Position
from gateway.store.records import NewTask, to_datetime
from gateway.store.scripts import Scripts
from gateway.store.tasks import Finish
from sdk.wire import (
    AttemptOutcome,
    CleanRequest,
    DeadLetterFilter,
    QueuePolicy,
    ResubmitRequest,
    TaskState,
)
from tests.support import until

from .conftest import Stores

Q = "q"
SECOND = 1000


# --- helpers ----------------------------------------------------------------------------------


async def make_queue(s: Stores, name: str = Q, **policy: object) -> None:
    policy.setdefault("max_attempts", 1)
    policy.setdefault("max_concurrency", 10_000)
    policy.setdefault("circuit_breaker", {"failures": 10_000})  # errors here are on purpose
    await s.queues.put(name, QueuePolicy.model_validate(policy), s.clock.now_ms())
    await s.queues.add_endpoint(
        EndpointRecord(
            id=f"ep-{name}",
            queue=name,
            url=f"http://worker.example/{name}",
            concurrency=10_000,
            capabilities=[],
            secrets=["whsec_x"],
            created_ms=s.clock.now_ms(),
        )
    )


async def enqueue(
    s: Stores,
    n: int = 1,
    *,
    queue: str = Q,
    name: str = "send",
    run_at: int | None = None,
    **fields: object,
) -> list[str]:
    now = s.clock.now_ms()
    tasks = [
        NewTask(
            id=str(ULID()),
            name=name,
            payload_json=json.dumps({"n": i}),
            priority=0,
            created_ms=now,
            run_at_ms=now if run_at is None else run_at,
            **fields,  # type: ignore[arg-type]
        )
        for i in range(n)
    ]
    for start in range(0, n, 500):
        await s.tasks.enqueue(queue, tasks[start : start + 500], now)
    return [t.id for t in tasks]


async def run_and_end(
    s: Stores, queue: str, outcome: AttemptOutcome, *, text: str = "boom", delay_ms: int = 0
) -> list[str]:
    """Claim every ready task of ``queue`` and end each attempt with ``outcome``."""
    now = s.clock.now_ms()
    claim = await s.tasks.claim(queue, 10_000, secrets.token_hex(16), now)
    ends = [
        Finish(
            lease.task_id,
            lease.token,
            outcome,
            http_status=500,
            text=text,
            traceback=f"Traceback: {lease.task_id}",
            delay_ms=delay_ms,
        )
        for lease in claim.leases
    ]
    await s.tasks.finish_many(queue, ends, now)
    return [lease.task_id for lease in claim.leases]


async def dead(s: Stores, n: int = 1, *, queue: str = Q, **fields: object) -> list[str]:
    """``n`` new tasks of ``queue`` that failed their one attempt and are dead."""
    ids = await enqueue(s, n, queue=queue, **fields)
    assert set(await run_and_end(s, queue, AttemptOutcome.FAILED)) == set(ids)
    return ids


async def state(s: Stores, task_id: str, queue: str = Q) -> str | None:
    record = await s.tasks.record(queue, task_id)
    return None if record is None else str(record["state"])


class Rig:
    def __init__(self, s: Stores, chunk: int = 500) -> None:
        self.ready: list[str] = []
        self.store = OperationsStore(s.redis, Scripts(s.redis), s.tasks, chunk=chunk)
        self.service = OperationsService(self.store, s.queues, s.clock, on_ready=self.ready.append)


# --- resubmitting -----------------------------------------------------------------------------


async def test_resubmit_by_filter_requeues_exactly_the_500_matching(stores: Stores) -> None:
    await make_queue(stores)
    await make_queue(stores, "other")
    matching = await dead(stores, 500, owner="acme", version="v2")
    other_owner = await dead(stores, 30, owner="globex", version="v2")
    other_name = await dead(stores, 20, name="charge", owner="acme", version="v2")
    other_version = await dead(stores, 10, owner="acme", version="v1")
    other_queue = await dead(stores, 10, queue="other", owner="acme", version="v2")
    rig = Rig(stores)
    stores.clock.advance(60 * SECOND)

    f = DeadLetterFilter(queue=Q, name="send", owner="acme", version="v2")
    result = await rig.service.resubmit(ResubmitRequest(filter=f))

    assert sorted(result.resubmitted) == sorted(matching)
    assert len(result.resubmitted) == 500
    assert result.skipped == []
    assert rig.ready == [Q]
    k = QueueKeys.of(Q)
    assert await stores.redis.zcard(k.dead) == 60
    for task_id in matching:
        record = await stores.tasks.record(Q, task_id)
        assert record is not None
        assert record["state"] == TaskState.QUEUED
        assert (record["att"], record["hist"]) == (0, 1)
        assert record["run_at"] == stores.clock.now_ms()
        assert not {"error", "finished", "first", "cancel"} & record.keys()
        assert await stores.redis.hexists(k.attempts, f"{task_id}:1")
    for task_id in other_owner + other_name + other_version:
        assert await state(stores, task_id) == TaskState.DEAD
    for task_id in other_queue:
        assert await state(stores, task_id, "other") == TaskState.DEAD
    counts = await stores.tasks.counts(Q)
    assert (counts[TaskState.QUEUED], counts[TaskState.DEAD]) == (500, 60)

    # They dispatch again, and their history grows instead of being overwritten.
    assert set(await run_and_end(stores, Q, AttemptOutcome.FAILED, text="again")) == set(matching)
    read = await stores.tasks.read(Q, matching[0])
    assert read is not None
    assert [json.loads(a)["error"] for a in read[4]] == ["boom", "again"]
    assert read[0]["state"] == TaskState.DEAD


async def test_resubmit_by_filter_spans_queues_up_to_the_limit_and_the_time_window(
    stores: Stores,
) -> None:
    await make_queue(stores, "a")
    await make_queue(stores, "b")
    start = stores.clock.now_ms()
    early = await dead(stores, 2, queue="a")
    stores.clock.advance(10 * SECOND)
    middle_a = await dead(stores, 3, queue="a")
    middle_b = await dead(stores, 3, queue="b")
    stores.clock.advance(10 * SECOND)
    late = await dead(stores, 2, queue="b")
    rig = Rig(stores)
    window = DeadLetterFilter(
        since=to_datetime(start + 10 * SECOND), until=to_datetime(start + 20 * SECOND)
    )

    first = await rig.service.resubmit(ResubmitRequest(filter=window, limit=4))
    # Queues in name order, oldest death first: all three of a, then the first one of b.
    assert first.resubmitted == [*middle_a, middle_b[0]]
    assert rig.ready == ["a", "b"]
    rest = await rig.service.resubmit(ResubmitRequest(filter=window))
    assert rest.resubmitted == middle_b[1:]
    for task_id in early:
        assert await state(stores, task_id, "a") == TaskState.DEAD
    for task_id in late:
        assert await state(stores, task_id, "b") == TaskState.DEAD

    with pytest.raises(QueueNotFound):
        await rig.service.resubmit(ResubmitRequest(filter=DeadLetterFilter(queue="nowhere")))


async def test_resubmit_by_ids_reports_what_it_skipped(stores: Stores) -> None:
    await make_queue(stores)
    (gone,) = await dead(stores)
    (done,) = await enqueue(stores)
    (lease,) = (await stores.tasks.claim(Q, 1, "seed", stores.clock.now_ms())).leases
    await stores.tasks.finish(
        Q, Finish(done, lease.token, AttemptOutcome.SUCCEEDED, text="1"), stores.clock.now_ms()
    )
    (queued,) = await enqueue(stores)
    unknown = str(ULID())
    rig = Rig(stores)

    result = await rig.service.resubmit(
        ResubmitRequest(ids=[gone, queued, unknown, done, gone], reset_attempts=False)
    )
    assert result.resubmitted == [gone]
    assert {(s.id, s.reason) for s in result.skipped} == {
        (queued, "not dead (state queued)"),
        (done, "not dead (state succeeded)"),
        (unknown, "not found"),
    }
    record = await stores.tasks.record(Q, gone)
    assert record is not None
    assert (record["state"], record["att"]) == (TaskState.QUEUED, 1)
    again = await rig.service.resubmit(ResubmitRequest(ids=[gone]))
    assert again.resubmitted == []
    assert [s.reason for s in again.skipped] == ["not dead (state queued)"]


async def test_resubmit_publishes_a_wake_when_the_ready_set_was_empty(stores: Stores) -> None:
    await make_queue(stores)
    first, second = await dead(stores, 2)
    rig = Rig(stores)
    async with stores.redis.pubsub() as pubsub:
        await pubsub.subscribe(keys.WAKE_CHANNEL)

        async def message() -> dict[str, object] | None:
            found: dict[str, object] | None = await pubsub.get_message(
                ignore_subscribe_messages=True, timeout=0.05
            )
            return found

        await rig.service.resubmit(ResubmitRequest(ids=[first]))
        woke = await until(message, what="a wake message")
        assert woke["data"] == Q
        # The ready set is not empty now: a second resubmit needs no wake.
        await rig.service.resubmit(ResubmitRequest(ids=[second]))
        await stores.redis.publish(keys.WAKE_CHANNEL, "marker")
        marker = await until(message, what="the marker")
        assert marker["data"] == "marker"
    assert rig.ready == [Q, Q]


# --- searching ----------------------------------------------------------------------------------


async def test_dead_letter_search_pages_across_queues_with_full_history(stores: Stores) -> None:
    await make_queue(stores, "a", max_attempts=2)
    await make_queue(stores, "b", max_attempts=2)
    ids = {}
    for queue, n in (("a", 3), ("b", 2)):
        ids[queue] = await enqueue(stores, n, queue=queue, owner="acme", version="v1")
        await run_and_end(stores, queue, AttemptOutcome.ERROR, text="first")  # retried at once
        stores.clock.advance(SECOND)
        await run_and_end(stores, queue, AttemptOutcome.ERROR, text="second")  # dead
        stores.clock.advance(SECOND)
    await dead(stores, 2, queue="a", owner="other")
    rig = Rig(stores)
    f = DeadLetterFilter(owner="acme", version="v1")

    page = await rig.service.dead_letters(f, 3)
    assert [t.id for t in page.items] == ids["a"]
    assert page.next_cursor is not None
    last = await rig.service.dead_letters(f, 3, page.next_cursor)
    assert [t.id for t in last.items] == ids["b"]
    assert last.next_cursor is None

    task = last.items[0]
    assert (task.queue, task.state, task.owner, task.version) == ("b", TaskState.DEAD, "acme", "v1")
    assert task.payload == {"n": 0}
    assert [(a.number, a.outcome, a.error) for a in task.attempts] == [
        (1, AttemptOutcome.ERROR, "first"),
        (2, AttemptOutcome.ERROR, "second"),
    ]
    assert all(a.traceback == f"Traceback: {task.id}" for a in task.attempts)
    assert task.error == "second"

    assert len((await rig.service.dead_letters(DeadLetterFilter(), 100)).items) == 7
    only_b = await rig.service.dead_letters(DeadLetterFilter(queue="b"), 100)
    assert [t.id for t in only_b.items] == ids["b"]
    assert (await rig.service.dead_letters(DeadLetterFilter(name="nothing"), 100)).items == []
    with pytest.raises(QueueNotFound):
        await rig.service.dead_letters(DeadLetterFilter(queue="nowhere"), 10)
    with pytest.raises(ValidationFailed) as bad:
        await rig.service.dead_letters(f, 3, "not-a-cursor")
    assert bad.value.errors[0].field == "cursor"


async def test_search_by_death_time_with_since_inclusive_and_until_exclusive(
    stores: Stores,
) -> None:
    await make_queue(stores)
    start = stores.clock.now_ms()
    batches = []
    for _ in range(3):
        batches.append(await dead(stores, 2))
        stores.clock.advance(10 * SECOND)
    rig = Rig(stores)

    async def died(since: int | None, until: int | None) -> list[str]:
        f = DeadLetterFilter(
            since=None if since is None else to_datetime(start + since),
            until=None if until is None else to_datetime(start + until),
        )
        return [t.id for t in (await rig.service.dead_letters(f, 100)).items]

    assert await died(10 * SECOND, 20 * SECOND) == batches[1]
    assert await died(10 * SECOND, None) == batches[1] + batches[2]
    assert await died(None, 10 * SECOND) == batches[0]
    assert await died(1, 10 * SECOND) == []
    with pytest.raises(ValidationError, match="timezone"):
        DeadLetterFilter(since=to_datetime(start).replace(tzinfo=None))


async def test_pages_neither_skip_nor_repeat_when_tasks_leave_meanwhile(stores: Stores) -> None:
    await make_queue(stores)
    ids = await dead(stores, 9)  # all died at the same millisecond: ordered by id
    ids.sort()
    rig = Rig(stores, chunk=2)  # several walk steps per page, too

    page = await rig.service.dead_letters(DeadLetterFilter(), 3)
    assert [t.id for t in page.items] == ids[:3]
    # The page's last task (the cursor's own) and an earlier one leave the dead letters.
    await rig.service.resubmit(ResubmitRequest(ids=[ids[2], ids[0]]))
    page = await rig.service.dead_letters(DeadLetterFilter(), 3, page.next_cursor)
    assert [t.id for t in page.items] == ids[3:6]
    await rig.service.resubmit(ResubmitRequest(ids=[ids[4]]))  # one before the cursor
    page = await rig.service.dead_letters(DeadLetterFilter(), 3, page.next_cursor)
    assert [t.id for t in page.items] == ids[6:9]
    assert page.next_cursor is None


async def test_walk_resumes_by_rank_or_by_score(stores: Stores) -> None:
    rig = Rig(stores)
    key = "jg:{z}:test"
    await stores.redis.zadd(key, {"a": 1, "b": 2, "c": 2, "d": 2, "e": 3})
    walk = rig.store.walk
    assert await walk(key, count=2) == [("a", 1), ("b", 2)]
    assert await walk(key, after=Position(2, "b"), count=2) == [("c", 2), ("d", 2)]
    assert await walk(key, after=Position(2, "bb"), count=5) == [("c", 2), ("d", 2), ("e", 3)]
    assert await walk(key, after=Position(1, "zz"), count=5) == [
        ("b", 2),
        ("c", 2),
        ("d", 2),
        ("e", 3),
    ]
    assert await walk(key, after=Position(2, "c"), before=3) == [("d", 2)]
    assert await walk(key, since=2, before=3) == [("b", 2), ("c", 2), ("d", 2)]
    # A member whose score moved is not trusted for its rank.
    assert await walk(key, after=Position(1, "e")) == [("b", 2), ("c", 2), ("d", 2), ("e", 3)]


def test_cursors_round_trip_and_refuse_anything_else() -> None:
    position = Position(1_700_000_000_123, "01ARZ3NDEKTSV4RRFFQ69G5FAV")
    cursor = encode_cursor(position, "q-1")
    assert cursor == "q-1:1700000000123:01ARZ3NDEKTSV4RRFFQ69G5FAV"
    assert decode_cursor(cursor) == ("q-1", position)
    assert decode_cursor(encode_cursor(position)) == ("", position)
    for bad in ("", "abc", "W10", "q:x:01ARZ3NDEKTSV4RRFFQ69G5FAV", "!!!!"):
        with pytest.raises(ValidationFailed):
            decode_cursor(bad)


# --- what waits, what runs --------------------------------------------------------------------


async def test_scheduled_lists_delayed_tasks_and_retries_by_due_time(stores: Stores) -> None:
    await make_queue(stores, max_attempts=3)
    now = stores.clock.now_ms()
    (later,) = await enqueue(stores, run_at=now + 60 * SECOND, owner="acme")
    (retry,) = await enqueue(stores)
    await run_and_end(stores, Q, AttemptOutcome.ERROR, text="flaky", delay_ms=5 * SECOND)
    (soonest,) = await enqueue(stores, run_at=now + 2 * SECOND)
    await enqueue(stores)  # queued: not listed
    rig = Rig(stores)

    page = await rig.service.scheduled(Q, 100)
    assert [(t.id, t.kind, t.attempt) for t in page.items] == [
        (soonest, "delayed", 0),
        (retry, "retry", 1),
        (later, "delayed", 0),
    ]
    assert page.next_cursor is None
    assert page.items[1].error == "flaky"
    assert page.items[1].due_at == to_datetime(now + 5 * SECOND)
    assert page.items[2].owner == "acme"

    first = await rig.service.scheduled(Q, 2)
    assert [t.id for t in first.items] == [soonest, retry]
    assert first.next_cursor is not None
    second = await rig.service.scheduled(Q, 2, first.next_cursor)
    assert [t.id for t in second.items] == [later]
    assert second.next_cursor is None

    with pytest.raises(ValidationFailed):
        await rig.service.scheduled(Q, 2, "not-a-cursor")
    with pytest.raises(QueueNotFound):
        await rig.service.scheduled("nowhere", 2)


async def test_running_shows_where_for_how_long_and_what_stalled(stores: Stores) -> None:
    await make_queue(stores, max_heartbeat_interval=10)
    await make_queue(stores, "quiet")
    start = stores.clock.now_ms()
    (beating,) = await enqueue(stores, owner="acme")
    (silent,) = await enqueue(stores)
    (patient,) = await enqueue(stores, heartbeat_ms=60 * SECOND)
    leases = {
        lease.task_id: lease
        for lease in (await stores.tasks.claim(Q, 10, "seed", stores.clock.now_ms())).leases
    }
    stores.clock.advance(2 * SECOND)
    (unwatched,) = await enqueue(stores, queue="quiet")
    await stores.tasks.claim("quiet", 10, "seed2", stores.clock.now_ms())
    stores.clock.advance(3 * SECOND)
    await stores.tasks.heartbeat(
        Q, beating, leases[beating].token, stores.clock.now_ms(), progress=0.5
    )
    stores.clock.advance(6 * SECOND)  # 11 s after the claim, 6 s after the heartbeat
    rig = Rig(stores)

    listing = await rig.service.running()
    assert not listing.truncated
    by_id = {t.id: t for t in listing.items}
    assert [t.id for t in listing.items[-1:]] == [unwatched]  # the latest to start
    assert (by_id[silent].stalled, by_id[beating].stalled, by_id[patient].stalled) == (
        True,
        False,
        False,
    )
    assert by_id[unwatched].stalled is False  # no interval anywhere
    task = by_id[beating]
    assert (task.queue, task.attempt, task.owner, task.progress) == (Q, 1, "acme", 0.5)
    assert (task.endpoint_id, task.endpoint_url) == (f"ep-{Q}", f"http://worker.example/{Q}")
    assert task.elapsed == 11.0
    assert task.started_at == to_datetime(start)
    assert task.last_heartbeat_at == to_datetime(start + 5 * SECOND)
    assert task.lease_expires_at is not None
    assert task.lease_expires_at - to_datetime(start + 5 * SECOND) == timedelta(seconds=30)
    assert by_id[unwatched].elapsed == 9.0

    assert [t.id for t in (await rig.service.running(owner="acme")).items] == [beating]
    assert {t.id for t in (await rig.service.running("quiet")).items} == {unwatched}
    short = await rig.service.running(limit=2)
    assert short.truncated
    assert len(short.items) == 2
    with pytest.raises(QueueNotFound):
        await rig.service.running("nowhere")


# --- cleaning ---------------------------------------------------------------------------------


async def test_clean_deletes_by_state_name_and_age_only(stores: Stores) -> None:
    await make_queue(stores)
    old_a = await dead(stores, 2, name="a")
    old_b = await dead(stores, 2, name="b")
    stores.clock.advance(60 * SECOND)
    new_a = await dead(stores, 2, name="a")
    (cancelled,) = await enqueue(stores, name="a")
    await stores.tasks.cancel(Q, cancelled, stores.clock.now_ms())
    await stores.redis.rpush(QueueKeys.of(Q).log(old_a[0]), "a line")
    stores.clock.advance(SECOND)
    rig = Rig(stores)

    request = CleanRequest(states=[TaskState.DEAD], name="a", older_than=30)
    assert (await rig.service.clean(Q, request)).deleted == 2
    for task_id in old_a:
        assert await stores.tasks.record(Q, task_id) is None
        assert await stores.tasks.locate(task_id) is None
        assert not await stores.redis.hexists(QueueKeys.of(Q).payload, task_id)
        assert not await stores.redis.hexists(QueueKeys.of(Q).attempts, f"{task_id}:1")
    assert not await stores.redis.exists(QueueKeys.of(Q).log(old_a[0]))
    for task_id in old_b + new_a:
        assert await state(stores, task_id) == TaskState.DEAD
    assert await state(stores, cancelled) == TaskState.CANCELLED

    assert (await rig.service.clean(Q, CleanRequest(limit=3))).deleted == 3
    assert (await rig.service.clean(Q, CleanRequest())).deleted == 2
    k = QueueKeys.of(Q)
    for key in (k.meta, k.payload, k.attempts, k.dead, k.cancelled):
        assert not await stores.redis.exists(key), key
    assert await stores.redis.keys("jg:ix*") == []
    with pytest.raises(QueueNotFound):
        await rig.service.clean("nowhere", CleanRequest())


async def test_clean_by_name_passes_over_other_names_across_chunks(stores: Stores) -> None:
    await make_queue(stores)
    names = ["a", "b", "b", "a", "b", "b", "b", "a", "b", "a", "b"]
    ids = {}
    for name in names:
        (ids[name + str(len(ids))],) = await dead(stores, name=name)
        stores.clock.advance(1)
    rig = Rig(stores, chunk=2)
    a_ids = [i for key, i in ids.items() if key.startswith("a")]

    request = CleanRequest(states=[TaskState.DEAD], name="a", limit=3)
    assert (await rig.service.clean(Q, request)).deleted == 3
    assert [await state(stores, i) for i in a_ids] == [None, None, None, TaskState.DEAD]
    request = CleanRequest(states=[TaskState.DEAD], name="a")
    assert (await rig.service.clean(Q, request)).deleted == 1
    assert await stores.redis.zcard(QueueKeys.of(Q).dead) == names.count("b")


async def test_clean_by_owner_deletes_only_that_owners_tasks_across_chunks(
    stores: Stores,
) -> None:
    await make_queue(stores)
    owners = ["acme", "other", None, "acme", "other", "acme", None]
    ids: list[tuple[str | None, str]] = []
    for owner in owners:
        (task_id,) = await dead(stores, name="a", owner=owner)
        ids.append((owner, task_id))
        stores.clock.advance(1)
    rig = Rig(stores, chunk=2)

    request = CleanRequest(states=[TaskState.DEAD], owner="acme", name="a")
    assert (await rig.service.clean(Q, request)).deleted == 3
    left = {task_id for _, task_id in ids if await state(stores, task_id) is not None}
    assert left == {task_id for owner, task_id in ids if owner != "acme"}


async def test_the_sweep_keeps_finished_tasks_for_the_default_retention(stores: Stores) -> None:
    await make_queue(stores)
    start = stores.clock.now_ms()
    (done,) = await enqueue(stores)
    await run_and_end(stores, Q, AttemptOutcome.SUCCEEDED, text="1")
    (died,) = await dead(stores)
    day = 86_400 * SECOND
    assert await stores.tasks.sweep(Q, start + 7 * day - 1, 100) == 0
    assert await stores.tasks.sweep(Q, start + 7 * day, 100) == 1
    assert await state(stores, done) is None
    assert await stores.tasks.sweep(Q, start + 30 * day - 1, 100) == 0
    assert await stores.tasks.sweep(Q, start + 30 * day, 100) == 1
    assert await state(stores, died) is None
