"""Deleting finished tasks (the sweep past retention, an operator's clean) leaves nothing of them
in Redis: each script deletes everything of a task that lies in its queue's slot (record,
payload, result, checkpoint, attempt records, durable steps, log list, dedup and singleton
entries, undelivered completion notice), so a gateway killed right after it leaves only what
lies outside the script's reach: the id index entry (another slot, dropped by the index's
repair). Steps and log lists were once deleted in the round trip after the sweep, steps with no
expiry: a gateway killed in between left up to 1 MiB of steps per task for ever.
"""

from __future__ import annotations

import secrets

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from gateway.background.recover_loop import RECKON_EVERY, Recoverer
from gateway.store.index import IndexRepair
from gateway.store.keys import QueueKeys
from gateway.store.operations import OperationsStore
from gateway.store.orphans import StepsRepair
from gateway.store.scripts import Scripts
from gateway.store.tasks import Finish
from sdk.wire import AttemptOutcome, TaskState
from tests.support import traces

from .conftest import Stores
from .test_flow_control import queue, run_all, task


async def durable_flow(s: Stores, url: str) -> set[str]:
    """A full flow on queue ``q``: a task with a dedup and a singleton key that records steps,
    a checkpoint and logs, then succeeds; a chained task that receives its result, records a
    step and fails for good; a singleton task cancelled while queued. Returns their ids."""
    now = s.clock.now_ms()
    first = task(now, dedup_key="order-7", singleton_key="sync")
    chained = task(now, depends_on=(first.id,), results_from=(("q", first.id),))
    await s.tasks.enqueue("q", [first, chained], now)
    (lease,) = (await s.tasks.claim("q", 10, secrets.token_hex(8), now)).leases
    assert lease.task_id == first.id
    for name in ("charge", "mail"):
        done = await s.tasks.step("q", first.id, lease.token, now, name, '{"ok":1}', 1 << 20)
        assert done.recorded
    await s.tasks.heartbeat("q", first.id, lease.token, now, checkpoint_json='{"at":2}')
    await s.tasks.append_log("q", first.id, lease.token, ['{"message":"hi"}'])
    await s.tasks.finish(
        "q", Finish(first.id, lease.token, AttemptOutcome.SUCCEEDED, text="7"), now
    )
    (lease,) = (await s.tasks.claim("q", 10, secrets.token_hex(8), now)).leases
    assert lease.task_id == chained.id
    assert lease.results_json == f'[{{"id":"{first.id}","result":7}}]'
    assert (await s.tasks.step("q", chained.id, lease.token, now, "a", "[1]", 1 << 20)).recorded
    await s.tasks.finish("q", Finish(chained.id, lease.token, AttemptOutcome.FAILED), now)
    cancelled = task(now, singleton_key="nightly", notify="http://127.0.0.1:9/done")
    await s.tasks.enqueue("q", [cancelled], now)
    await s.tasks.cancel("q", cancelled.id, now)
    ids = {first.id, chained.id, cancelled.id}
    k = QueueKeys.of("q")
    assert set(traces(url, ids)) >= {k.steps, k.singleton, k.notify}
    return ids


async def test_the_sweep_script_alone_leaves_nothing_but_index_entries(
    stores: Stores, redis_url: str
) -> None:
    """What a gateway killed right after the sweep's script leaves: only what the script
    cannot reach, the index entries (other slots), which the index's repair drops; then the
    sweep's second step leaves nothing at all."""
    await queue(stores, retention_succeeded=60, retention_failed=60)
    start = stores.clock.now_ms()
    ids = await durable_flow(stores, redis_url)
    assert await stores.tasks.sweep_slot("q", start + 59_999, 100) == []
    swept = await stores.tasks.sweep_slot("q", start + 60_000, 100)
    assert set(swept) == ids
    left = traces(redis_url, ids)
    assert left
    assert all(key.startswith("jg:ix:") for key in left), left
    await stores.tasks.unindex(swept)
    assert traces(redis_url, ids) == {}


async def test_a_sweep_and_a_clean_leave_nothing_of_their_tasks(
    stores: Stores, redis_url: str
) -> None:
    await queue(stores, retention_succeeded=60, retention_failed=60)
    start = stores.clock.now_ms()
    swept = await durable_flow(stores, redis_url)
    assert await stores.tasks.sweep("q", start + 60_000, 100) == 3
    assert traces(redis_url, swept) == {}
    cleaned = await durable_flow(stores, redis_url)
    operations = OperationsStore(stores.redis, Scripts(stores.redis), stores.tasks)
    for state in (TaskState.SUCCEEDED, TaskState.DEAD, TaskState.CANCELLED):
        assert await operations.clean("q", state, start + 60_000, 100) == 1
    assert traces(redis_url, cleaned) == {}


async def test_the_repair_drops_steps_earlier_versions_left_without_their_task(
    stores: Stores,
) -> None:
    """Steps left by a gateway of an earlier version stopped between its sweep's script and
    the next round trip: a full rescan's repair turn drops them, and keeps a live task's."""
    await queue(stores, retention_succeeded=60)
    await queue(stores, "other")
    now = stores.clock.now_ms()
    live = task(now)
    await stores.tasks.enqueue("q", [live], now)
    (lease,) = (await stores.tasks.claim("q", 10, secrets.token_hex(8), now)).leases
    assert (await stores.tasks.step("q", live.id, lease.token, now, "a", "1", 1 << 20)).recorded
    # As left: more fields than one call reads (a hash table, walked by several calls), in two
    # queues.
    left = {q: [task(now).id for _ in range(100)] for q in ("q", "other")}
    for q, ids in left.items():
        big = '[{"name":"a","result":"' + "x" * 100 + '","attempt":1,"recorded_ms":1}]'
        await stores.redis.hset(QueueKeys.of(q).steps, mapping=dict.fromkeys(ids, big))
    recoverer = Recoverer(
        stores.tasks,
        stores.queues,
        stores.clock,
        index_repair=IndexRepair(stores.redis, Scripts(stores.redis)),
        steps_repair=StepsRepair(Scripts(stores.redis)),
    )
    recoverer.schedule(AsyncIOScheduler(), rescan_interval=60)
    for _ in range(RECKON_EVERY - 1):
        await recoverer.rescan_job()
    assert await stores.redis.hlen(QueueKeys.of("q").steps) == 101  # not before its turn
    await recoverer.rescan_job()  # the full one
    assert await stores.redis.hkeys(QueueKeys.of("q").steps) == [live.id]
    assert not await stores.redis.exists(QueueKeys.of("other").steps)
    assert await StepsRepair(Scripts(stores.redis)).repair(["q", "other"]) == 0


async def test_a_sweep_with_nothing_to_delete_runs_no_script(stores: Stores) -> None:
    """A busy queue is recovered often (each promote, each expiry) and each recovery sweeps:
    with no finished task past retention and no ended dedup window the sweep stops after its
    read, without the script; an ended window alone still has the script drop it."""
    await queue(stores, dedup_window=60)
    now = stores.clock.now_ms()
    await stores.tasks.enqueue("q", [task(now, dedup_key="k")], now)
    await run_all(stores)
    k = QueueKeys.of("q")

    async def scripts_run() -> int:
        return int((await stores.redis.info("commandstats"))["cmdstat_evalsha"]["calls"])

    before = await scripts_run()
    assert await stores.tasks.sweep("q", now + 1_000, 100) == 0
    assert await scripts_run() == before
    assert await stores.redis.hexists(k.dedup, "k")
    assert await stores.tasks.sweep("q", now + 61_000, 100) == 0
    assert await scripts_run() == before + 1
    assert not await stores.redis.hexists(k.dedup, "k")
