"""Per-key concurrency (issue 22): the scripts against a real Redis with a manual clock. A key
at its limit holds its further tasks (still 'queued', not claimable); every way a task of the
key leaves ready-or-running counts it out and moves the key's next held task in, behind the
tasks of other keys already waiting (fair rotation). See gateway/store/lua/key_limits.lua."""

from __future__ import annotations

import json
import random
import secrets

import httpx
import pytest
from ulid import ULID

from gateway.store.keys import QueueKeys
from gateway.store.operations import OperationsStore
from gateway.store.records import NewTask
from gateway.store.scripts import Scripts
from gateway.store.tasks import CancelResult, Finish
from sdk.wire import AttemptOutcome, KeyConcurrency, TaskState

from .conftest import Stores
from .test_flow_control import queue, state
from .test_rate_limits import api, fields  # noqa: F401 (api: a fixture)
from .test_recoverer import recoverer

K = QueueKeys.of("q")


def task(now: int, key: str | None, *, priority: int = 0, **fields: object) -> NewTask:
    fields.setdefault("run_at_ms", now)
    return NewTask(
        id=str(ULID()),
        name="t",
        payload_json="null",
        priority=priority,
        created_ms=now,
        concurrency_key=key,
        **fields,  # type: ignore[arg-type]
    )


async def keyed_queue(s: Stores, limit: int) -> None:
    await queue(s, key_concurrency=KeyConcurrency(limit=limit), max_attempts=1)


async def enqueue(s: Stores, *tasks: NewTask) -> list[NewTask]:
    await s.tasks.enqueue("q", list(tasks), s.clock.now_ms())
    return list(tasks)


async def claim(s: Stores, count: int = 100) -> dict[str, str]:
    """Claim up to ``count``: task id -> lease token, in claim order."""
    c = await s.tasks.claim("q", count, secrets.token_hex(8), s.clock.now_ms())
    return {x.task_id: x.token for x in c.leases}


async def end(
    s: Stores, leases: dict[str, str], task_id: str, outcome: AttemptOutcome, delay_ms: int = 0
) -> None:
    done = await s.tasks.finish(
        "q",
        Finish(task_id, leases[task_id], outcome, text="null", delay_ms=delay_ms),
        s.clock.now_ms(),
    )
    assert done.fence.value == "OK"


async def counts(s: Stores) -> dict[str, int]:
    return {k: int(v) for k, v in (await s.redis.hgetall(K.key_counts)).items()}


def ids(tasks: list[NewTask]) -> list[str]:
    return [t.id for t in tasks]


async def test_a_key_at_its_limit_holds_its_tasks_and_the_others_go(stores: Stores) -> None:
    await keyed_queue(stores, 2)
    now = stores.clock.now_ms()
    flood = await enqueue(stores, *(task(now, "A") for _ in range(50)))
    small = await enqueue(stores, *(task(now, key) for key in "BBBC"), task(now, None))
    leases = await claim(stores)
    # Two of A, two of B, C and the task without a key: the held ones were never looked at.
    assert list(leases) == [*ids(flood[:2]), *ids(small[:2]), *ids(small[3:])]
    assert await counts(stores) == {"A": 2, "B": 2, "C": 1}
    # Held tasks are queued for every reader: the state, the depth, the listing.
    assert await state(stores, flood[2].id) is TaskState.QUEUED
    assert (await stores.tasks.counts("q"))[TaskState.QUEUED] == 48 + 1
    assert await claim(stores) == {}


@pytest.mark.parametrize(
    ("outcome", "delay_ms", "then"),
    [
        (AttemptOutcome.SUCCEEDED, 0, TaskState.SUCCEEDED),
        (AttemptOutcome.FAILED, 0, TaskState.DEAD),
        (AttemptOutcome.ERROR, 0, TaskState.DEAD),  # max_attempts 1: attempts exhausted
        (AttemptOutcome.BUSY, 5_000, TaskState.SCHEDULED),
        (AttemptOutcome.RELEASED, 5_000, TaskState.SCHEDULED),  # a durable sleep
        (AttemptOutcome.EXPIRED, 0, TaskState.DEAD),
    ],
)
async def test_every_way_out_of_running_moves_the_next_held_task_in(
    stores: Stores, outcome: AttemptOutcome, delay_ms: int, then: TaskState
) -> None:
    await keyed_queue(stores, 1)
    now = stores.clock.now_ms()
    first, second, _ = await enqueue(stores, *(task(now, "A") for _ in range(3)))
    leases = await claim(stores)
    assert list(leases) == [first.id]
    if outcome is AttemptOutcome.EXPIRED:
        stores.clock.advance(31_000)  # past the 30 s lease, as the recoverer finds it
    await end(stores, leases, first.id, outcome, delay_ms)
    assert await state(stores, first.id) is then
    assert await counts(stores) == {"A": 1}
    assert list(await claim(stores)) == [second.id]
    if then is TaskState.SCHEDULED:
        # Due again while its key is at its limit: held, behind the third (queued earlier).
        stores.clock.advance(delay_ms)
        assert await stores.tasks.promote("q", stores.clock.now_ms(), 10) == 1
        assert await state(stores, first.id) is TaskState.QUEUED
        assert await claim(stores) == {}
        assert await counts(stores) == {"A": 1}


async def test_a_task_back_in_the_queue_at_once_keeps_its_place_in_the_count(
    stores: Stores,
) -> None:
    await keyed_queue(stores, 1)
    now = stores.clock.now_ms()
    first, second = await enqueue(stores, task(now, "A"), task(now, "A"))
    leases = await claim(stores)
    await end(stores, leases, first.id, AttemptOutcome.RELEASED)  # given back, due now
    assert await counts(stores) == {"A": 1}
    assert list(await claim(stores)) == [first.id]  # the held one still waits
    assert await state(stores, second.id) is TaskState.QUEUED


async def test_cancel_of_held_ready_and_running_tasks(stores: Stores) -> None:
    await keyed_queue(stores, 1)
    now = stores.clock.now_ms()
    a1, a2, a3, a4 = await enqueue(stores, *(task(now, "A") for _ in range(4)))
    # A held task leaves without touching the count.
    assert await stores.tasks.cancel("q", a3.id, now) is CancelResult.CANCELLED
    assert await counts(stores) == {"A": 1}
    # The counted one, not yet claimed: the next held one takes its place.
    assert await stores.tasks.cancel("q", a1.id, now) is CancelResult.CANCELLED
    assert await counts(stores) == {"A": 1}
    leases = await claim(stores)
    assert list(leases) == [a2.id]
    # A running one ends as cancelled when its attempt ends: then a4 goes.
    assert await stores.tasks.cancel("q", a2.id, now) is CancelResult.REQUESTED
    await end(stores, leases, a2.id, AttemptOutcome.ERROR)
    assert await state(stores, a2.id) is TaskState.CANCELLED
    leases = await claim(stores)
    assert list(leases) == [a4.id]
    await end(stores, leases, a4.id, AttemptOutcome.SUCCEEDED)
    # Every task of the key ended: nothing is left of it.
    assert await counts(stores) == {}
    assert await stores.redis.zcard(K.ready) == 0


async def test_the_next_task_of_a_key_goes_behind_the_other_keys_waiting(stores: Stores) -> None:
    await keyed_queue(stores, 1)
    now = stores.clock.now_ms()
    a = await enqueue(stores, *(task(now, "A") for _ in range(3)))
    stores.clock.advance(10)  # B and C come later than all of A
    b, c = await enqueue(stores, task(now + 10, "B"), task(now + 10, "C"))
    leases = await claim(stores, 1)
    assert list(leases) == [a[0].id]
    stores.clock.advance(10)
    await end(stores, leases, a[0].id, AttemptOutcome.SUCCEEDED)
    # A's next was enqueued before B and C but goes after them: A does not keep the head.
    assert list(await claim(stores)) == [b.id, c.id, a[1].id]


async def test_priority_comes_first_among_held_tasks_and_after_rotation(stores: Stores) -> None:
    await keyed_queue(stores, 1)
    now = stores.clock.now_ms()
    a1, low, high = await enqueue(
        stores, task(now, "A"), task(now, "A", priority=-5), task(now, "A", priority=5)
    )
    other = (await enqueue(stores, task(now, "B", priority=-1)))[0]
    leases = await claim(stores, 1)
    assert list(leases) == [a1.id]
    stores.clock.advance(10)
    await end(stores, leases, a1.id, AttemptOutcome.SUCCEEDED)
    # high (priority 5) is A's next, and priority still beats rotation: ahead of B's -1.
    assert list(await claim(stores)) == [high.id, other.id]
    assert await state(stores, low.id) is TaskState.QUEUED


async def test_the_queue_and_key_limits_apply_together(stores: Stores) -> None:
    await queue(stores, key_concurrency=KeyConcurrency(limit=2), max_concurrency=3)
    now = stores.clock.now_ms()
    a = await enqueue(stores, *(task(now, "A") for _ in range(4)))
    b = await enqueue(stores, *(task(now, "B") for _ in range(4)))
    leases = await claim(stores)
    assert list(leases) == [a[0].id, a[1].id, b[0].id]  # the queue's 3, A's 2
    await end(stores, leases, a[0].id, AttemptOutcome.SUCCEEDED)
    # Room for one: B's second (ready before A's third came in behind it).
    assert list(await claim(stores)) == [b[1].id]


async def test_raising_or_removing_the_limit_moves_held_tasks_in(stores: Stores) -> None:
    await keyed_queue(stores, 1)
    now = stores.clock.now_ms()
    a = await enqueue(stores, *(task(now, "A") for _ in range(4)))
    b = await enqueue(stores, *(task(now, "B") for _ in range(2)))
    assert list(await claim(stores)) == [a[0].id, b[0].id]
    await stores.queues.patch("q", {"key_concurrency": {"limit": 2, "path": None}}, now)
    assert list(await claim(stores)) == [a[1].id, b[1].id]
    assert await counts(stores) == {"A": 2, "B": 2}
    await stores.queues.patch("q", {"key_concurrency": None}, now)
    assert list(await claim(stores)) == [a[2].id, a[3].id]
    assert await counts(stores) == {"A": 4, "B": 2}  # counted still, in case a limit returns


async def test_a_lowered_limit_lets_running_tasks_finish_and_admits_below_it(
    stores: Stores,
) -> None:
    await keyed_queue(stores, 3)
    now = stores.clock.now_ms()
    a = await enqueue(stores, *(task(now, "A") for _ in range(5)))
    leases = await claim(stores)
    assert list(leases) == ids(a[:3])
    await stores.queues.patch("q", {"key_concurrency": {"limit": 1, "path": None}}, now)
    await end(stores, leases, a[0].id, AttemptOutcome.SUCCEEDED)
    await end(stores, leases, a[1].id, AttemptOutcome.SUCCEEDED)
    assert await claim(stores) == {}  # one still runs: at the limit
    await end(stores, leases, a[2].id, AttemptOutcome.SUCCEEDED)
    assert list(await claim(stores)) == [a[3].id]


async def test_dependencies_met_and_resubmitted_dead_tasks_are_admitted_by_key(
    stores: Stores,
) -> None:
    await keyed_queue(stores, 1)
    now = stores.clock.now_ms()
    first, second = await enqueue(stores, task(now, "A"), task(now, "A"))
    after = (await enqueue(stores, task(now, "A", depends_on=(first.id,))))[0]
    leases = await claim(stores)
    await end(stores, leases, first.id, AttemptOutcome.SUCCEEDED)
    # first's end moved second in, then released its dependent: held behind second.
    assert await state(stores, after.id) is TaskState.QUEUED
    leases = await claim(stores)
    assert list(leases) == [second.id]
    await end(stores, leases, second.id, AttemptOutcome.FAILED)  # dead
    leases = await claim(stores)
    assert list(leases) == [after.id]
    ops = OperationsStore(stores.redis, Scripts(stores.redis), stores.tasks)
    await ops.resubmit("q", [second.id], now, reset_attempts=True)
    assert await state(stores, second.id) is TaskState.QUEUED
    assert await claim(stores) == {}  # held while its key's task runs
    await end(stores, leases, after.id, AttemptOutcome.SUCCEEDED)
    assert list(await claim(stores)) == [second.id]


async def test_the_recoverer_expiring_a_lease_moves_the_next_held_task_in(
    stores: Stores,
) -> None:
    await queue(
        stores,
        key_concurrency=KeyConcurrency(limit=1),
        lease_timeout=10,
        backoff={"strategy": "constant", "base_delay": 5},
    )
    rec, _ = recoverer(stores)
    now = stores.clock.now_ms()
    first, second = await enqueue(stores, task(now, "A"), task(now, "A"))
    leases = await claim(stores)
    await stores.tasks.accept_many("q", [(first.id, leases[first.id])], now)  # answered 202
    stores.clock.advance(10_000)
    await rec.step()
    # The lease ran out: first waits for its retry (5 s), second took its place.
    assert await state(stores, first.id) is TaskState.SCHEDULED
    assert list(await claim(stores)) == [second.id]
    stores.clock.advance(5_000)
    await rec.step()
    assert await state(stores, first.id) is TaskState.QUEUED  # due, but held behind second
    assert await claim(stores) == {}
    assert await counts(stores) == {"A": 1}


async def exact(s: Stores, limit: int | None) -> int:
    """The invariant: each key's count is its tasks claimable or running, read from the records,
    and none above ``limit``. Returns how many tasks are held."""
    active: dict[str, int] = {}
    held_now = 0
    for raw in (await s.redis.hgetall(K.meta)).values():
        t = json.loads(raw)
        held = str(t.get("m", "")).startswith("~") and t["state"] == "queued"
        held_now += held
        if "ck" in t and (t["state"] == "running" or (t["state"] == "queued" and not held)):
            active[t["ck"]] = active.get(t["ck"], 0) + 1
    assert await counts(s) == active
    if limit is not None:
        assert max(active.values(), default=0) <= limit
    return held_now


async def test_counts_stay_exact_through_a_random_mix_of_changes(stores: Stores) -> None:
    rng = random.Random(22)
    await queue(stores, key_concurrency=KeyConcurrency(limit=2), max_attempts=3)
    limit: int | None = 2
    running: dict[str, str] = {}
    queued: list[str] = []
    held = 0
    outcomes = [
        (AttemptOutcome.SUCCEEDED, 0),
        (AttemptOutcome.ERROR, 0),
        (AttemptOutcome.ERROR, 500),
        (AttemptOutcome.RELEASED, 0),
        (AttemptOutcome.RELEASED, 300),
        (AttemptOutcome.FAILED, 0),
    ]
    for _ in range(300):
        now = stores.clock.now_ms()
        op = rng.random()
        if op < 0.3:
            new = [
                task(
                    now,
                    rng.choice(["A", "B", "C", None]),
                    priority=rng.choice([0, 0, 5]),
                    run_at_ms=now + rng.choice([0, 0, 0, 200]),
                )
                for _ in range(rng.randint(1, 6))
            ]
            await enqueue(stores, *new)
            queued += ids(new)
        elif op < 0.55:
            running.update(await claim(stores, rng.randint(1, 5)))
        elif op < 0.8 and running:
            task_id = rng.choice(sorted(running))
            outcome, delay = rng.choice(outcomes)
            await end(stores, {task_id: running.pop(task_id)}, task_id, outcome, delay)
        elif op < 0.88 and queued:
            await stores.tasks.cancel("q", rng.choice(queued), now)
        elif op < 0.96:
            stores.clock.advance(rng.choice([100, 300, 600]))
            await stores.tasks.promote("q", stores.clock.now_ms(), 100)
        else:
            new_limit = rng.choice([1, 2, 3, None])
            kc = None if new_limit is None else {"limit": new_limit, "path": None}
            await stores.queues.patch("q", {"key_concurrency": kc}, now)
            # What a key may hold from now on: the highest limit since the last removal (tasks
            # admitted under a higher one may run on), none after a removal.
            limit = None if new_limit is None or limit is None else max(limit, new_limit)
        held += await exact(stores, limit)
    assert held > 0  # the mix did hold tasks


# --- through the API -------------------------------------------------------------------------


async def test_the_key_is_the_tasks_own_else_the_payloads(api: httpx.AsyncClient) -> None:  # noqa: F811
    r = await api.put("/v1/queues/q", json={"key_concurrency": {"limit": 2, "path": "kwargs.c"}})
    assert r.json()["policy"]["key_concurrency"] == {"limit": 2, "path": "kwargs.c"}
    r = await api.post(
        "/v1/queues/q/tasks/batch",
        json={
            "tasks": [
                {"name": "t", "payload": {"kwargs": {"c": 7}}},
                {"name": "t", "payload": {"kwargs": {"c": 7}}, "concurrency_key": "vip"},
                {"name": "t", "payload": {"kwargs": {}}},
            ]
        },
    )
    assert r.status_code == 201, r.text
    assert [t["concurrency_key"] for t in r.json()["tasks"]] == ["7", "vip", None]
    read = await api.get(f"/v1/tasks/{r.json()['tasks'][1]['id']}")
    assert read.json()["concurrency_key"] == "vip"


async def test_a_concurrency_key_needs_the_queues_key_concurrency(api: httpx.AsyncClient) -> None:  # noqa: F811
    await api.put("/v1/queues/q", json={})
    r = await api.post("/v1/queues/q/tasks", json={"name": "t", "concurrency_key": "a"})
    assert fields(r) == {"concurrency_key"}
    assert fields(await api.put("/v1/queues/q", json={"key_concurrency": {"limit": 0}})) == {
        "key_concurrency.limit"
    }
    r = await api.patch(
        "/v1/queues/q",
        json={"key_concurrency": {"limit": 1}, "remove_key_concurrency": True},
    )
    assert fields(r) == {"remove_key_concurrency"}
