"""The redriver against a real Redis, one step at a time with a manual clock (no sleeps): which
dead tasks a pass moves, the cap per task, the history entry, the turn among gateways, paging.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from redis.asyncio import Redis

from gateway.background.redriver import Redriver
from gateway.store.keys import QueueKeys
from gateway.store.operations import OperationsStore
from gateway.store.queues import QueueStore
from gateway.store.redrive import RedriveStore
from gateway.store.scripts import Scripts
from gateway.store.tasks import Finish
from sdk.wire import AttemptOutcome, FailureKind, QueuePolicy, Redrive, TaskState

from .conftest import Stores
from .test_recoverer import Q, claim, enqueue, history, make_queue, record

MINUTE = 60_000
TIMEOUT, SERVER, CONNECTION = FailureKind.TIMEOUT, FailureKind.SERVER_ERROR, FailureKind.CONNECTION


@pytest.fixture
async def store(stores: Stores) -> RedriveStore:
    scripts = Scripts(stores.redis)
    return RedriveStore(stores.redis, scripts, OperationsStore(stores.redis, scripts, stores.tasks))


def redriver(s: Stores, store: RedriveStore, **kw: Any) -> Redriver:
    return Redriver(store, s.queues, s.clock, **kw)


async def with_redrive(s: Stores, **redrive: Any) -> Redrive:
    """Queue Q, one attempt per task, dead-lettered, with this redrive policy (and a circuit
    breaker that never opens, so that every failure here leaves the endpoint in use)."""
    policy = Redrive.model_validate(redrive)
    await make_queue(
        s,
        max_attempts=1,
        redrive=policy.model_dump(mode="json"),
        circuit_breaker={"failures": 10_000},
    )
    return policy


async def dies(
    s: Stores,
    kind: FailureKind | None,
    outcome: AttemptOutcome = AttemptOutcome.ERROR,
    task_id: str | None = None,
) -> str:
    """A task (new, or ``task_id`` queued again) claimed and failed once: dead (max_attempts 1)."""
    if task_id is None:
        task_id = await enqueue(s)
    (lease,) = await claim(s)
    assert lease.task_id == task_id
    finish = Finish(task_id, lease.token, outcome, text="it broke", failure=kind)
    done = await s.tasks.finish(Q, finish, s.clock.now_ms())
    assert done.state is TaskState.DEAD, done
    return task_id


async def expires(s: Stores) -> str:
    """A task whose lease ran out (after a 202): dead, of kind timeout though none is given."""
    task_id = await enqueue(s)
    (lease,) = await claim(s)
    s.clock.advance(lease.expires_ms - s.clock.now_ms())
    done = await s.tasks.finish(
        Q, Finish(task_id, lease.token, AttemptOutcome.EXPIRED), s.clock.now_ms()
    )
    assert done.state is TaskState.DEAD
    return task_id


async def state(s: Stores, task_id: str) -> str:
    return str((await record(s, task_id))["state"])


async def test_a_pass_moves_only_dead_tasks_of_a_matching_kind_dead_long_enough(
    stores: Stores, store: RedriveStore
) -> None:
    s = stores
    await with_redrive(s, on=["timeout", "5xx"], after=60, every=10)
    timed_out = await dies(s, TIMEOUT)
    crashed = await dies(s, SERVER)
    expired = await expires(s)
    unreachable = await dies(s, CONNECTION)  # a kind the policy does not redrive
    refused = await dies(s, None, AttemptOutcome.FAILED)  # the worker refused: no kind
    raised = await dies(s, None)  # the worker reported its own error: no kind
    s.clock.advance(30_000)
    young = await dies(s, TIMEOUT)  # dead only 31 s when the pass runs
    s.clock.advance(31_000)
    woken: list[str] = []
    r = redriver(s, store, on_ready=woken.append)
    await r.refresh()

    (done,) = await r.step()

    assert (done.queue, done.moved, done.read) == (Q, 3, 6)
    assert woken == [Q]
    for task_id in (timed_out, crashed, expired):
        found = await record(s, task_id)
        assert (found["state"], found["att"], found["rd"]) == ("queued", 0, 1)
        assert "fk" not in found
        assert "error" not in found
    for task_id in (unreachable, refused, raised, young):
        assert await state(s, task_id) == "dead"
    last = (await history(s, crashed))[-1]
    assert last == {
        "n": 1,
        "started": s.clock.now_ms(),
        "ended": s.clock.now_ms(),
        "outcome": "redriven",
        "kind": "5xx",
        "error": "redriven automatically after a 5xx failure (redrive 1 of 3)",
    }
    assert [a["kind"] for a in await history(s, expired)] == ["timeout", "timeout"]
    assert "kind" not in (await history(s, refused))[0]
    dead = await s.redis.zrange(QueueKeys.of(Q).dead, 0, -1)
    assert set(dead) == {unreachable, refused, raised, young}


async def test_a_task_is_redriven_at_most_max_redrives_times(
    stores: Stores, store: RedriveStore
) -> None:
    s = stores
    await with_redrive(s, after=0, every=10, max_redrives=2)
    task_id = await dies(s, CONNECTION)
    r = redriver(s, store)
    await r.refresh()
    for n in (1, 2):
        s.clock.advance(10_000)
        await s.redis.delete(QueueKeys.of(Q).redrive)  # the turn of the last pass ran out
        (done,) = await r.step()
        assert done.moved == 1
        assert (await record(s, task_id))["rd"] == n
        await dies(s, CONNECTION, task_id=task_id)  # and it fails again

    s.clock.advance(10_000)
    await s.redis.delete(QueueKeys.of(Q).redrive)
    (done,) = await r.step()

    assert (done.moved, done.capped) == (0, 1)
    assert await state(s, task_id) == "dead"
    outcomes = [a["outcome"] for a in await history(s, task_id)]
    assert outcomes == ["error", "redriven", "error", "redriven", "error"]
    errors = [a["error"] for a in await history(s, task_id) if a["outcome"] == "redriven"]
    assert errors[1] == "redriven automatically after a connection failure (redrive 2 of 2)"


async def test_one_pass_per_cadence_among_gateways_and_each_task_moves_once(
    stores: Stores, store: RedriveStore
) -> None:
    s = stores
    policy = await with_redrive(s, after=0, every=10)
    task_ids = [await dies(s, TIMEOUT) for _ in range(20)]
    s.clock.advance(1)
    one, two = redriver(s, store, holder="one"), redriver(s, store, holder="two")
    await asyncio.gather(one.refresh(), two.refresh())

    passes = await asyncio.gather(one.step(), two.step())

    assert sorted(len(p) for p in passes) == [0, 1]  # one gateway got the turn
    assert sum(p.moved for ps in passes for p in ps) == 20
    ttl = await s.redis.pttl(QueueKeys.of(Q).redrive)
    assert 9_000 < ttl <= 10_000  # held for the cadence, by Redis's clock
    assert await two.step() == []
    assert await one.step() == []

    # Even passes that both ran (turn or no turn) move each task once: only dead tasks move.
    for lease in await claim(s, len(task_ids)):
        again = Finish(lease.task_id, lease.token, AttemptOutcome.ERROR, failure=TIMEOUT)
        await s.tasks.finish(Q, again, s.clock.now_ms())
    s.clock.advance(1)
    now = s.clock.now_ms()
    both = await asyncio.gather(one.redrive(Q, policy, now), two.redrive(Q, policy, now))
    assert sum(p.moved for p in both) == 20
    for task_id in task_ids:
        assert (await record(s, task_id))["rd"] == 2
        assert [a["outcome"] for a in await history(s, task_id)].count("redriven") == 2


async def test_a_gateway_that_lost_the_turn_tries_again_when_it_ends(
    stores: Stores, store: RedriveStore
) -> None:
    s = stores
    await with_redrive(s, after=0, every=60)
    await dies(s, TIMEOUT)
    await s.redis.set(QueueKeys.of(Q).redrive, "another gateway", px=3_000)
    r = redriver(s, store)
    await r.refresh()
    assert await r.step() == []  # the other gateway's turn
    s.clock.advance(2_900)
    assert await r.step() == []  # not yet due here
    s.clock.advance(200)
    await s.redis.delete(QueueKeys.of(Q).redrive)  # its turn ran out (by Redis's clock)
    (done,) = await r.step()  # 3 s later, not one cadence (60 s) later
    assert done.moved == 1


async def test_a_pass_that_redis_refused_is_made_at_once_when_redis_is_back(
    stores: Stores, store: RedriveStore
) -> None:
    s = stores
    await with_redrive(s, after=0, every=600)
    task_id = await dies(s, TIMEOUT)
    r = redriver(s, store)
    await r.refresh()
    # Redis refuses writes (out of memory: a real refusal, as when it is down), so taking the
    # turn fails: the pass raises, is logged, and would wait a whole cadence (10 min).
    await s.redis.config_set("maxmemory", 1)
    try:
        assert await r.step() == []
    finally:
        await s.redis.config_set("maxmemory", 0)
    s.clock.advance(1_000)
    assert await r.step() == []  # not due again before its cadence
    r.reconnected()  # the pub/sub connection is back
    (done,) = await r.step()
    assert done.moved == 1
    assert await state(s, task_id) == "queued"


async def test_a_pass_is_bounded_and_the_next_goes_on_where_it_stopped(
    stores: Stores, store: RedriveStore
) -> None:
    s = stores
    await with_redrive(s, after=0, every=10)
    head = [await dies(s, None, AttemptOutcome.FAILED) for _ in range(5)]  # never redriven
    tail = [await dies(s, SERVER) for _ in range(5)]
    s.clock.advance(1)
    r = redriver(s, store, page=2, max_read=6, max_moved=3)
    await r.refresh()

    first = (await r.step())[0]
    s.clock.advance(10_000)
    await s.redis.delete(QueueKeys.of(Q).redrive)
    second = (await r.step())[0]
    s.clock.advance(10_000)
    await s.redis.delete(QueueKeys.of(Q).redrive)
    third = (await r.step())[0]

    assert (first.read, first.moved) == (6, 1)  # read bound: the refused head, then one
    assert (second.read, second.moved) == (3, 3)  # went on after the sixth; moved bound
    assert (third.read, third.moved) == (1, 1)  # the last one, and the end of the index
    assert all([await state(s, t) == "queued" for t in tail])
    assert all([await state(s, t) == "dead" for t in head])


async def test_policies_are_read_on_refresh_and_after_a_change_here(
    stores: Stores, store: RedriveStore
) -> None:
    s = stores
    await s.queues.put("plain", QueuePolicy(), s.clock.now_ms())
    r = redriver(s, store)
    await r.refresh()
    assert r.policies == {}
    policy = await with_redrive(s, on=["5xx"])
    assert r.policies == {}  # changed elsewhere: seen at the next refresh
    await r.refresh()
    assert r.policies == {Q: policy}
    await s.queues.patch(Q, {"redrive": None}, s.clock.now_ms())
    r.changed(Q)
    await r.step()
    assert r.policies == {}


async def test_a_step_with_no_redrive_policy_sends_nothing_to_redis(stores: Stores) -> None:
    s = stores
    unreachable = Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.5)
    scripts = Scripts(unreachable)
    nowhere = RedriveStore(unreachable, scripts, OperationsStore(unreachable, scripts, s.tasks))
    r = Redriver(nowhere, QueueStore(unreachable, scripts), s.clock)
    try:
        assert await r.step() == []  # any command would raise: Redis is not there
    finally:
        await unreachable.aclose()


async def test_the_redrive_count_and_entry_show_on_the_wire(
    stores: Stores, store: RedriveStore
) -> None:
    from gateway.store.records import attempt_from_record, task_from_record

    s = stores
    await with_redrive(s, after=0)
    task_id = await dies(s, TIMEOUT)
    s.clock.advance(1)
    r = redriver(s, store)
    await r.refresh()
    await r.step()
    read = await s.tasks.read(Q, task_id)
    assert read is not None
    attempts = [attempt_from_record(a) for a in read[4]]
    task = task_from_record(Q, task_id, read[0], QueuePolicy(), history=attempts)
    assert task.redrives == 1
    assert [(a.outcome, a.failure) for a in task.attempts] == [
        (AttemptOutcome.ERROR, FailureKind.TIMEOUT),
        (AttemptOutcome.REDRIVEN, FailureKind.TIMEOUT),
    ]
