"""The ready set's members in their shorter shape (``order_of`` in ``lua/prelude.lua``: 17
base-64 characters for rank, run_at and sequence number), and the older shape (26 hex digits,
the record's ``sq``) that gateways before it wrote: still claimed and cancelled, sorted before
every member of the current shape, and rewritten by ``lua/reshape.lua``."""

from __future__ import annotations

import json
from typing import Any

from gateway.store.keys import QueueKeys
from gateway.store.tasks import CancelResult
from sdk.wire import QueuePolicy

from .conftest import Stores
from .test_store import new_task, seed, setup_queue

K = QueueKeys.of("q")


def older_member(record: dict[str, Any], task_id: str) -> str:
    """The member a gateway before the shorter shape made for this record."""
    rank, run_at, seq = 1000 - record.get("prio", 0), record["run_at"], record["sq"]
    return f"{record.get('cap', '')}/{rank:03x}{run_at:011x}{seq:012x}{task_id}"


async def to_older_shape(stores: Stores, task_id: str) -> str:
    """Store a queued task as a gateway before the shorter shape did; returns its member."""
    record = json.loads(await stores.redis.hget(K.meta, task_id))
    (current,) = [m for m in await stores.redis.zrange(K.ready, 0, -1) if m.endswith(task_id)]
    record["sq"] = record.pop("sn")
    member = older_member(record, task_id)
    await stores.redis.zrem(K.ready, current)
    await stores.redis.zadd(K.ready, {member: 0})
    await stores.redis.hset(K.meta, task_id, json.dumps(record))
    return member


async def test_a_member_is_44_characters_and_sorts_by_priority_run_at_then_fifo(
    stores: Stores,
) -> None:
    await setup_queue(stores)
    now = stores.clock.now_ms()
    tasks = [
        new_task(now, priority=-1000),
        new_task(now, priority=1000),
        new_task(now, run_at=now - 1),
        new_task(now),
        new_task(now),
        new_task(now, priority=1),
    ]
    await stores.tasks.enqueue("q", tasks, now)
    members = await stores.redis.zrange(K.ready, 0, -1)
    assert {len(m) for m in members} == {44}
    order = [tasks[i].id for i in (1, 5, 2, 3, 4, 0)]
    assert [m[-26:] for m in members] == order
    claim = await stores.tasks.claim("q", 6, seed(), now)
    assert [lease.task_id for lease in claim.leases] == order


async def test_tasks_queued_in_the_older_shape_are_claimed_first_and_cancelled(
    stores: Stores,
) -> None:
    await setup_queue(stores)
    now = stores.clock.now_ms()
    older = [new_task(now), new_task(now), new_task(now)]
    await stores.tasks.enqueue("q", older, now)
    for task in older:
        await to_older_shape(stores, task.id)
    urgent = new_task(now, priority=5)
    await stores.tasks.enqueue("q", [urgent], now)
    assert await stores.tasks.cancel("q", older[1].id, now) is CancelResult.CANCELLED
    assert await stores.redis.zcard(K.ready) == 3
    claim = await stores.tasks.claim("q", 10, seed(), now)
    # Until rewritten, an older member sorts before every current one, whatever the priority.
    assert [lease.task_id for lease in claim.leases] == [older[0].id, older[2].id, urgent.id]


async def test_reshape_rewrites_older_members_in_order_and_is_idempotent(stores: Stores) -> None:
    await setup_queue(stores, QueuePolicy())
    now = stores.clock.now_ms()
    tasks = [new_task(now, priority=p) for p in (0, 3, 0, -2, 3)]
    tasks.append(new_task(now, capability="gpu"))
    await stores.tasks.enqueue("q", tasks, now)
    shaped = await stores.redis.zrange(K.ready, 0, -1)
    for task in tasks:
        await to_older_shape(stores, task.id)
    assert await stores.tasks.reshape("q", 2) == 6
    assert await stores.redis.zrange(K.ready, 0, -1) == shaped
    assert await stores.tasks.reshape("q", 2) == 0
    for task in tasks:
        record = json.loads(await stores.redis.hget(K.meta, task.id))
        assert "sq" not in record
        assert isinstance(record["sn"], int)
    assert await stores.tasks.cancel("q", tasks[1].id, now) is CancelResult.CANCELLED
    claim = await stores.tasks.claim("q", 10, seed(), now)
    assert [lease.task_id for lease in claim.leases] == [tasks[i].id for i in (4, 0, 2, 3)]
