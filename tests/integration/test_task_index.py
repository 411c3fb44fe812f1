"""The id index in buckets: what older versions stored still reads, and the repair drops the
fields a gateway that died half way left behind."""

from __future__ import annotations

from collections import Counter

import pytest

from gateway.core.errors import TaskExists
from gateway.core.ids import IdMaker
from gateway.store import keys
from gateway.store.index import BUCKETS, IndexRepair, locate_many
from gateway.store.scripts import Scripts
from gateway.store.tasks import Finish
from sdk.wire import AttemptOutcome, QueuePolicy

from .conftest import Stores
from .test_store import new_task, seed, setup_queue


def test_the_gateways_ids_fill_every_bucket_evenly() -> None:
    assert keys.task_index("01BX5ZZKBKACTAV9WEVGEMMVT0") == "jg:ix:3T0"  # V is 27: 27 & 3
    made = IdMaker().take(3 * len(BUCKETS))
    counts = Counter(keys.task_index(task_id) for task_id in made)
    assert set(counts) == set(BUCKETS)
    assert set(counts.values()) == {3}


async def test_entries_live_in_buckets_by_the_ids_low_bits(stores: Stores) -> None:
    await setup_queue(stores)
    now = stores.clock.now_ms()
    single, batch, chosen = [new_task(now)], [new_task(now), new_task(now)], [new_task(now)]
    await stores.tasks.enqueue("q", single, now)
    await stores.tasks.enqueue("q", batch, now)  # the index script: one command for the batch
    await stores.tasks.enqueue("q", chosen, now, client_ids=True)
    for task in single + batch + chosen:
        assert await stores.redis.hget(keys.task_index(task.id), task.id) == "q"
    assert await stores.redis.keys("jg:idx:*") == []
    buckets = await stores.redis.keys("jg:ix:*")
    assert [await stores.redis.ttl(key) for key in buckets] == [-1] * len(buckets)  # no expiry


async def test_tasks_indexed_by_an_older_version_are_found_refused_elsewhere_and_forgotten(
    stores: Stores,
) -> None:
    """Before the buckets, the index was a key per task with an expiry: a task stored then is
    located through it, its id cannot be taken by another queue, and it goes with its task."""
    await setup_queue(stores, QueuePolicy(retention_succeeded=60))
    await stores.queues.put("other", QueuePolicy(), stores.clock.now_ms())
    now = stores.clock.now_ms()
    old, new = new_task(now), new_task(now)
    await stores.tasks.enqueue("q", [old, new], now)
    await stores.redis.hdel(keys.task_index(old.id), old.id)  # as an older version stored it:
    await stores.redis.set(keys.legacy_task_index(old.id), "q", px=keys.INDEX_TTL_MS)
    assert await stores.tasks.locate(old.id) == "q"
    assert await locate_many(stores.redis, [old.id, new.id, "7ZZZZZZZZZZZZZZZZZZZZZZZZZ"]) == [
        "q",
        "q",
        None,
    ]
    with pytest.raises(TaskExists):
        await stores.tasks.enqueue("other", [old], now, client_ids=True)
    assert await stores.redis.hget(keys.task_index(old.id), old.id) is None  # nothing left
    for lease in (await stores.tasks.claim("q", 2, seed(), now)).leases:
        await stores.tasks.finish(
            "q", Finish(lease.task_id, lease.token, AttemptOutcome.SUCCEEDED, text="1"), now
        )
    assert await stores.tasks.sweep("q", now + 60_000, 100) == 2
    assert await stores.tasks.locate(old.id) is None
    assert await stores.redis.keys("jg:idx:*") == await stores.redis.keys("jg:ix:*") == []


async def test_the_repair_drops_fields_a_stopped_sweep_left_on_its_second_pass(
    stores: Stores,
) -> None:
    await setup_queue(stores, QueuePolicy(retention_succeeded=60))
    now = stores.clock.now_ms()
    swept = [new_task(now) for _ in range(3)]
    kept, late = new_task(now), new_task(now)
    await stores.tasks.enqueue("q", [*swept, kept], now)
    for lease in (await stores.tasks.claim("q", 3, seed(), now)).leases:
        await stores.tasks.finish(
            "q", Finish(lease.task_id, lease.token, AttemptOutcome.SUCCEEDED, text="1"), now
        )

    # The sweep's script alone: the gateway stops before the index step.
    assert len(await stores.tasks.sweep_slot("q", now + 60_000, 100)) == 3
    # An enqueue caught between its index write and its script (the same round trip).
    await stores.redis.hset(keys.task_index(late.id), late.id, "q")
    repair = IndexRepair(stores.redis, Scripts(stores.redis), batch=100)
    assert await repair.repair() == 0  # a first sighting only makes suspects
    assert [await stores.tasks.locate(t.id) for t in swept] == ["q"] * 3
    await stores.tasks.enqueue("q", [late], now, client_ids=True)  # its script ran since
    assert await repair.repair() == 3
    assert [await stores.tasks.locate(t.id) for t in swept] == [None] * 3
    assert [await stores.tasks.locate(t.id) for t in (kept, late)] == ["q", "q"]
    assert await repair.repair() == 0
    assert not await stores.redis.exists(keys.INDEX_SUSPECTS)


async def test_one_gateway_repairs_per_cadence(stores: Stores) -> None:
    first, second = (IndexRepair(stores.redis, Scripts(stores.redis)) for _ in range(2))
    assert await first.run(3_600_000) == 0
    assert await second.run(3_600_000) is None
    assert 0 < await stores.redis.pttl(keys.INDEX_TURN) <= 3_240_000


async def test_a_task_matched_deduplicated_debounced_or_throttled_leaves_no_entry(
    stores: Stores,
) -> None:
    await setup_queue(stores)
    now = stores.clock.now_ms()
    first, again = new_task(now, dedup_key="k"), new_task(now, dedup_key="k")
    await stores.tasks.enqueue("q", [first], now)
    (stored,) = await stores.tasks.enqueue("q", [again], now)
    assert stored.duplicate_of == first.id
    pending, merged = (
        new_task(now, run_at=now + 10_000, debounce=("k", 10_000, 0)) for _ in range(2)
    )
    passed, dropped = (new_task(now, throttle=("k", 10_000, 1, False)) for _ in range(2))
    for t in (pending, merged, passed, dropped):
        await stores.tasks.enqueue("q", [t], now)
    kept, gone = [first, pending, passed], [again, merged, dropped]
    assert await locate_many(stores.redis, [t.id for t in kept + gone]) == ["q"] * 3 + [None] * 3
    for t in gone:
        assert not await stores.redis.hexists(keys.task_index(t.id), t.id)
