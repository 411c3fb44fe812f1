"""With ``compact_records``, a plain queued task's record is stored as the text ``<sn> <run_at>
<name>`` (``plain_record`` in ``lua/prelude.lua``); any other record, and any record once the task
moves on, stays JSON. Gateways read both forms whatever their setting."""

from __future__ import annotations

import json

import pytest
from redis.asyncio import Redis

from gateway.store.keys import QueueKeys
from gateway.store.queues import QueueStore
from gateway.store.records import load_record
from gateway.store.scripts import Scripts
from gateway.store.tasks import CancelResult, Finish, TaskStore
from sdk.wire import AttemptOutcome, TaskState

from .conftest import Stores
from .test_ready_shape import to_older_shape
from .test_store import new_task, seed, setup_queue

K = QueueKeys.of("q")


@pytest.fixture
async def compact(stores: Stores) -> Stores:
    """The same Redis through scripts that store plain records as text."""
    scripts = Scripts(stores.redis, compact_records=True)
    await scripts.load()
    return Stores(
        stores.redis,
        TaskStore(stores.redis, scripts),
        QueueStore(stores.redis, scripts),
        stores.clock,
    )


async def stored(redis: Redis, task_id: str) -> str:
    return str(await redis.hget(K.meta, task_id))


async def test_plain_queued_records_are_text_and_run_as_before(
    compact: Stores, stores: Stores
) -> None:
    await setup_queue(compact)
    now = compact.clock.now_ms()
    plain = new_task(now)
    other = [new_task(now, priority=2), new_task(now, dedup_key="d"), new_task(now, run_at=now + 9)]
    await compact.tasks.enqueue("q", [plain, *other], now)
    assert await stored(compact.redis, plain.id) == f"1 {now} t"
    for task in other:
        assert (await stored(compact.redis, task.id)).startswith("{")
    assert load_record(await stored(compact.redis, plain.id)) == {
        "name": "t",
        "run_at": now,
        "created": now,
        "sn": 1,
        "att": 0,
        "hist": 0,
        "prio": 0,
        "state": "queued",
    }
    assert load_record((await stored(compact.redis, plain.id)).encode())["sn"] == 1
    # A gateway without the setting reads it: the page of queued tasks, a claim, a finish.
    rows, _ = await stores.tasks.page("q", TaskState.QUEUED, 0, 10)
    assert {row[0] for row in rows} == {plain.id, other[0].id, other[1].id}
    claim = await stores.tasks.claim("q", 10, seed(), now)
    assert [lease.task_id for lease in claim.leases] == [other[0].id, plain.id, other[1].id]
    assert json.loads(await stored(compact.redis, plain.id))["state"] == "running"
    ends = [
        Finish(lease.task_id, lease.token, AttemptOutcome.ERROR, 500, "x", delay_ms=0)
        for lease in claim.leases
    ]
    await compact.tasks.finish_many("q", ends, now)
    # Back to ready after its retry: attempts spent, so JSON.
    assert json.loads(await stored(compact.redis, plain.id))["att"] == 1
    # Due later than it was made: created is not run_at, so JSON once due too.
    assert await compact.tasks.promote("q", now + 9, 10) == 1
    due = await stored(compact.redis, other[2].id)
    assert due.startswith("{")
    assert load_record(due)["state"] == "queued"


async def test_a_record_rewritten_by_a_script_becomes_text(compact: Stores, stores: Stores) -> None:
    """Any script that saves a plain queued record (here the rewrite of an older gateway's
    member) stores the text form."""
    await setup_queue(stores)
    now = stores.clock.now_ms()
    task = new_task(now)
    await stores.tasks.enqueue("q", [task], now)
    await to_older_shape(stores, task.id)
    assert await compact.tasks.reshape("q", 10) == 1
    assert await stored(compact.redis, task.id) == f"1 {now} t"


async def test_a_text_record_is_cancelled_and_claimed_by_either_gateway(
    compact: Stores, stores: Stores
) -> None:
    await setup_queue(compact)
    now = compact.clock.now_ms()
    tasks = [new_task(now) for _ in range(3)]
    await compact.tasks.enqueue("q", tasks, now)
    assert await stores.tasks.cancel("q", tasks[0].id, now) is CancelResult.CANCELLED
    assert await compact.tasks.cancel("q", tasks[1].id, now) is CancelResult.CANCELLED
    assert await compact.redis.zcard(K.ready) == 1
    claim = await compact.tasks.claim("q", 10, seed(), now)
    assert [lease.task_id for lease in claim.leases] == [tasks[2].id]
    lease = claim.leases[0]
    assert (lease.name, lease.attempt, lease.ready_ms) == ("t", 1, now)
    done = await compact.tasks.finish_many(
        "q", [Finish(lease.task_id, lease.token, AttemptOutcome.SUCCEEDED, 200, "1")], now
    )
    assert [d.state for d in done] == [TaskState.SUCCEEDED]
