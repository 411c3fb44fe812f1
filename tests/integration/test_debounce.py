"""Debounce and throttle in the enqueue script, one call at a time with a manual clock: replace,
window end, max wait, a task that started, throttle drop and delay, and the bookkeeping keys'
expiry (lua/enqueue.lua, "Debounce and throttle")."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from datetime import datetime, timedelta

import httpx
import pytest
from redis.asyncio import Redis

from gateway.store.keys import QueueKeys
from gateway.store.records import NewTask
from gateway.store.tasks import Stored
from sdk.wire import TaskState

from .conftest import Stores
from .test_api import api as api
from .test_api import problem
from .test_flow_control import queue, run_all, state, task

K = QueueKeys.of("q")
WINDOW = 10_000


def debounced(now: int, payload: object, window: int = WINDOW, most: int = 0) -> NewTask:
    made = task(now, run_at_ms=now + min(window, most or window), debounce=("k", window, most))
    return dataclasses.replace(made, payload_json=json.dumps(payload))


def throttled(now: int, limit: int = 1, delay: bool = False, **kw: object) -> NewTask:
    return task(now, throttle=("k", WINDOW, limit, delay), **kw)


async def one(s: Stores, t: NewTask) -> Stored:
    (stored,) = await s.tasks.enqueue("q", [t], t.created_ms)
    return stored


async def payload(s: Stores, task_id: str) -> object:
    return json.loads(await s.redis.hget(K.payload, task_id))


async def test_enqueues_inside_the_window_replace_the_payload_and_move_the_start(
    stores: Stores,
) -> None:
    await queue(stores)
    now = stores.clock.now_ms()
    first = debounced(now, 1)
    assert await one(stores, first) == Stored(TaskState.SCHEDULED)
    key = K.debounce("t", "k")
    assert 0 < await stores.redis.pttl(key) <= WINDOW
    for n in range(2, 5):
        stores.clock.advance(3_000)
        now = stores.clock.now_ms()
        later = debounced(now, n)
        stored = await one(stores, later)
        assert stored.state is None
        assert stored.replaced is not None
        assert (stored.replaced.id, stored.replaced.seq) == (first.id, n)
        assert stored.replaced.run_at_ms == now + WINDOW
        assert stored.replaced.created_ms == first.created_ms
        assert stored.replaced.state is TaskState.SCHEDULED
        # Nothing is stored for the later enqueue: not its record, not its id's index entry.
        assert await stores.tasks.record("q", later.id) is None
        assert await stores.tasks.locate(later.id) is None
    record = await stores.tasks.record("q", first.id)
    assert record is not None
    assert (record["dbk"], record["dbn"], record["run_at"]) == ("k", 4, now + WINDOW)
    assert await payload(stores, first.id) == 4
    assert await stores.redis.zscore(K.scheduled, first.id) == now + WINDOW
    assert await stores.redis.hlen(K.meta) == 1


async def test_an_enqueue_after_the_window_ended_makes_a_new_task(stores: Stores) -> None:
    await queue(stores)
    now = stores.clock.now_ms()
    first = debounced(now, 1)
    await one(stores, first)
    stores.clock.advance(WINDOW)  # the window's end: the task is due, not replaceable
    second = debounced(stores.clock.now_ms(), 2)
    assert await one(stores, second) == Stored(TaskState.SCHEDULED)
    assert await payload(stores, first.id) == 1
    # The new task holds the key now: the next enqueue replaces it, not the first.
    third = await one(stores, debounced(stores.clock.now_ms(), 3))
    assert third.replaced is not None
    assert third.replaced.id == second.id


async def test_max_wait_caps_a_burst_that_never_pauses(stores: Stores) -> None:
    await queue(stores)
    start = stores.clock.now_ms()
    first = debounced(start, 0, most=25_000)
    await one(stores, first)
    runs_at = []
    for n in range(1, 5):  # an enqueue every 6 s, inside each 10 s window
        stores.clock.advance(6_000)
        stored = await one(stores, debounced(stores.clock.now_ms(), n, most=25_000))
        assert stored.replaced is not None
        runs_at.append(stored.replaced.run_at_ms - start)
    assert runs_at == [16_000, 22_000, 25_000, 25_000]  # capped: first enqueue + max wait
    assert await stores.redis.zscore(K.scheduled, first.id) == start + 25_000
    stores.clock.advance(1_000)
    await stores.tasks.promote("q", stores.clock.now_ms(), 100)
    assert await run_all(stores) == [first.id]
    assert await payload(stores, first.id) == 4
    # The burst is over: the next enqueue starts a new task.
    assert (await one(stores, debounced(stores.clock.now_ms(), 5))).state is TaskState.SCHEDULED


async def test_a_shorter_max_wait_that_has_passed_makes_the_task_ready_at_once(
    stores: Stores,
) -> None:
    await queue(stores)
    first = debounced(stores.clock.now_ms(), 1)
    await one(stores, first)
    stores.clock.advance(6_000)
    stored = await one(stores, debounced(stores.clock.now_ms(), 2, window=5_000, most=5_000))
    assert stored.replaced is not None
    assert stored.replaced.state is TaskState.QUEUED
    assert not await stores.redis.exists(K.debounce("t", "k"))
    assert await stores.redis.zscore(K.scheduled, first.id) is None
    assert await run_all(stores) == [first.id]
    assert await payload(stores, first.id) == 2


async def test_a_debounced_task_that_started_is_not_replaced(stores: Stores) -> None:
    await queue(stores)
    first = debounced(stores.clock.now_ms(), 1)
    await one(stores, first)
    stores.clock.advance(WINDOW + 1_000)
    await stores.tasks.promote("q", stores.clock.now_ms(), 100)
    claim = await stores.tasks.claim("q", 1, "s", stores.clock.now_ms())
    assert [x.task_id for x in claim.leases] == [first.id]
    # The key's entry may outlive the window (here the clock moved, not Redis's): the holder is
    # running, so the enqueue makes a new pending task.
    await stores.redis.set(K.debounce("t", "k"), f"{first.id} {first.created_ms}")
    second = debounced(stores.clock.now_ms(), 2)
    assert await one(stores, second) == Stored(TaskState.SCHEDULED)
    assert await payload(stores, first.id) == 1
    assert await state(stores, first.id) is TaskState.RUNNING


async def test_a_batch_with_one_debounce_key_twice_merges_the_second_into_the_first(
    stores: Stores,
) -> None:
    await queue(stores)
    now = stores.clock.now_ms()
    a, b, plain = debounced(now, "a"), debounced(now, "b"), task(now)
    stored = await stores.tasks.enqueue("q", [a, plain, b], now)
    assert stored[0] == Stored(TaskState.SCHEDULED)
    assert stored[1] == Stored(TaskState.QUEUED)
    assert stored[2].replaced is not None
    assert (stored[2].replaced.id, stored[2].replaced.seq) == (a.id, 2)
    assert await payload(stores, a.id) == "b"


async def test_throttle_drop_lets_the_limit_through_per_window(stores: Stores) -> None:
    await queue(stores)
    now = stores.clock.now_ms()
    let = [throttled(now, limit=2) for _ in range(2)]
    assert await stores.tasks.enqueue("q", let, now) == [Stored(TaskState.QUEUED)] * 2
    over = throttled(now, limit=2)
    assert await one(stores, over) == Stored(None, dropped_for=let[1].id)
    assert await stores.tasks.record("q", over.id) is None
    assert await stores.tasks.locate(over.id) is None
    key = K.throttle("t", "k")
    assert 0 < await stores.redis.pttl(key) <= WINDOW
    stores.clock.advance(WINDOW)  # a new window
    assert await one(stores, throttled(stores.clock.now_ms(), limit=2)) == Stored(TaskState.QUEUED)
    # Another key, or another task name, counts on its own.
    other = task(stores.clock.now_ms(), throttle=("other", WINDOW, 1, False))
    assert await one(stores, other) == Stored(TaskState.QUEUED)


async def test_throttle_delay_fills_the_next_windows_in_turn(stores: Stores) -> None:
    await queue(stores)
    now = stores.clock.now_ms()
    batch = [throttled(now, limit=2, delay=True) for _ in range(5)]
    stored = await stores.tasks.enqueue("q", batch, now)
    assert stored[:2] == [Stored(TaskState.QUEUED)] * 2
    assert stored[2:] == [
        Stored(TaskState.SCHEDULED, delayed_to=now + WINDOW),
        Stored(TaskState.SCHEDULED, delayed_to=now + WINDOW),
        Stored(TaskState.SCHEDULED, delayed_to=now + 2 * WINDOW),
    ]
    for t, at in zip(batch[2:], (1, 1, 2), strict=True):
        assert await stores.redis.zscore(K.scheduled, t.id) == now + at * WINDOW
    # The key lives until the last window holding a task ends.
    assert 2 * WINDOW < await stores.redis.pttl(K.throttle("t", "k")) <= 3 * WINDOW
    # A drop-mode enqueue while only later windows have room is dropped.
    dropped = await one(stores, throttled(now))
    assert dropped == Stored(None, dropped_for=batch[4].id)


async def test_a_dropped_member_a_batch_member_depends_on_is_the_task_let_through(
    stores: Stores,
) -> None:
    await queue(stores)
    now = stores.clock.now_ms()
    let, over = throttled(now), throttled(now)
    after = task(now, depends_on=(over.id,))
    stored = await stores.tasks.enqueue("q", [let, over, after], now)
    assert stored[1] == Stored(None, dropped_for=let.id)
    assert stored[2] == Stored(TaskState.WAITING)
    assert await run_all(stores) == [let.id]
    assert await state(stores, after.id) is TaskState.QUEUED


async def test_idle_keys_leave_nothing_behind(stores: Stores) -> None:
    await queue(stores)
    now = stores.clock.now_ms()
    # ms: Redis itself expires the keys. Long enough that a loaded machine still finds both
    # before they go (50 ms was not, at a load of 15).
    short = 1000
    await one(stores, debounced(now, 1, window=short))
    await one(stores, task(now, throttle=("k", short, 1, False)))
    assert await stores.redis.exists(K.debounce("t", "k"), K.throttle("t", "k")) == 2
    for key in (K.debounce("t", "k"), K.throttle("t", "k")):
        assert 0 < await stores.redis.pttl(key) <= short
    # Polled with a deadline: Redis expires a key on access once its time has passed.
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 5
    while await stores.redis.exists(K.debounce("t", "k"), K.throttle("t", "k")):
        assert loop.time() < deadline, "the bookkeeping keys did not expire"
        await asyncio.sleep(0.01)


# --- through the API -----------------------------------------------------------------------

TASKS = "/v1/queues/mail-out/tasks"


def body(n: object, **options: object) -> dict[str, object]:
    return {"name": "digest", "payload": n, **options}


DEBOUNCE = {"debounce": {"key": "user-7", "window": 60}}


async def test_the_answer_names_the_surviving_task_and_the_enqueue_number(
    api: httpx.AsyncClient,
) -> None:
    first = await api.post(TASKS, json=body(1, **DEBOUNCE))
    assert first.status_code == 201
    made = first.json()
    assert made["state"] == "scheduled"
    assert made["flow"] == {
        "debounce_key": "user-7",
        "debounce_seq": 1,
        "replaced": False,
        "throttled": None,
    }
    second = await api.post(TASKS, json=body(2, **DEBOUNCE))
    assert second.status_code == 200  # nothing new was stored
    merged = second.json()
    assert (merged["id"], merged["created_at"]) == (made["id"], made["created_at"])
    assert (merged["flow"]["replaced"], merged["flow"]["debounce_seq"]) == (True, 2)
    assert merged["payload"] == 2
    assert merged["run_at"] >= made["run_at"]
    shown = (await api.get(f"/v1/tasks/{made['id']}")).json()
    assert (shown["payload"], shown["run_at"]) == (2, merged["run_at"])
    assert (shown["flow"]["debounce_seq"], shown["flow"]["replaced"]) == (2, False)
    batch = await api.post(f"{TASKS}/batch", json={"tasks": [body(3, **DEBOUNCE)]})
    assert batch.status_code == 201
    (third,) = batch.json()["tasks"]
    assert (third["id"], third["flow"]["replaced"], third["flow"]["debounce_seq"]) == (
        made["id"],
        True,
        3,
    )


async def test_throttle_answers_dropped_with_the_task_let_through_or_delayed(
    api: httpx.AsyncClient,
) -> None:
    drop = {"throttle": {"key": "acct-1", "window": 60, "limit": 1}}
    let = await api.post(TASKS, json=body(1, **drop))
    assert let.status_code == 201
    assert let.json()["flow"] is None  # the throttle let it through untouched
    dropped = await api.post(TASKS, json=body(2, **drop))
    assert dropped.status_code == 200
    assert dropped.json()["id"] == let.json()["id"]
    assert dropped.json()["flow"]["throttled"] == "dropped"
    assert dropped.json()["payload"] == 1  # the task let through, as it is
    delay = {"throttle": {"key": "acct-2", "window": 60, "mode": "delay"}}
    now = (await api.post(TASKS, json=body(1, **delay))).json()
    later = await api.post(TASKS, json=body(2, **delay))
    assert later.status_code == 201
    assert (later.json()["flow"]["throttled"], later.json()["state"]) == ("delayed", "scheduled")
    shown = (await api.get(f"/v1/tasks/{later.json()['id']}")).json()
    assert shown["run_at"] == later.json()["run_at"] > now["run_at"]


async def test_receipts_say_what_debounce_and_throttle_made_of_an_enqueue(
    api: httpx.AsyncClient,
) -> None:
    """Under ``Prefer: return=minimal`` (what the SDK's .apply() asks for) the receipt carries
    the flow, so a handle can tell a replaced or dropped enqueue from a stored one."""
    minimal = {"prefer": "return=minimal"}
    first = await api.post(TASKS, json=body(1, **DEBOUNCE), headers=minimal)
    assert first.status_code == 201
    assert first.json()["flow"]["debounce_seq"] == 1
    second = await api.post(TASKS, json=body(2, **DEBOUNCE), headers=minimal)
    assert second.status_code == 200
    assert second.headers["preference-applied"] == "return=minimal"
    receipt = second.json()
    assert (receipt["id"], receipt["state"]) == (first.json()["id"], "scheduled")
    assert (receipt["flow"]["replaced"], receipt["flow"]["debounce_seq"]) == (True, 2)
    drop = {"throttle": {"key": "acct-9", "window": 60}}
    let = (await api.post(TASKS, json=body(1, **drop), headers=minimal)).json()
    dropped = await api.post(f"{TASKS}/batch", json={"tasks": [body(2, **drop)]}, headers=minimal)
    (shown,) = dropped.json()["tasks"]
    assert (shown["id"], shown["flow"]["throttled"]) == (let["id"], "dropped")


async def test_a_dropped_enqueue_whose_task_is_gone_gets_429(
    api: httpx.AsyncClient, redis_url: str
) -> None:
    drop = {"throttle": {"key": "acct-3", "window": 60}}
    let = (await api.post(TASKS, json=body(1, **drop))).json()
    async with Redis.from_url(redis_url) as redis:
        await redis.hdel(QueueKeys.of("mail-out").meta, let["id"])
    found = problem(await api.post(TASKS, json=body(2, **drop)), 429)
    assert "acct-3" in found["detail"]


@pytest.mark.parametrize(
    ("options", "reason"),
    [
        ({"delay": 5}, "delay"),
        ({"run_at": "2030-01-01T00:00:00Z"}, "run_at"),
        ({"dedup_key": "d"}, "dedup_key"),
        ({"singleton_key": "s"}, "singleton_key"),
        ({"id": "01ARZ3NDEKTSV4RRFFQ69G5FAV"}, "id"),
        ({"depends_on": ["01ARZ3NDEKTSV4RRFFQ69G5FAV"]}, "depends_on"),
        ({"group": "g"}, "group"),
        ({"after_group": "g"}, "after_group"),
        ({"throttle": {"key": "k", "window": 1}}, "throttle"),
    ],
)
async def test_debounce_with_what_makes_the_pending_task_ambiguous_is_refused(
    api: httpx.AsyncClient, options: dict[str, object], reason: str
) -> None:
    found = problem(await api.post(TASKS, json=body(1, **DEBOUNCE, **options)), 422)
    assert f"debounce cannot be combined with {reason}" in found["detail"]


async def test_a_max_wait_below_the_window_is_taken_and_caps_the_first_run(
    api: httpx.AsyncClient,
) -> None:
    """JSON Schema cannot compare the two numbers, so the schema admits a max_wait below the
    window: the gateway takes it (it was 422), and the task runs max_wait after the burst's
    first enqueue, however many enqueues follow."""
    options = {"debounce": {"key": "k", "window": 600, "max_wait": 30}}
    first = await api.post(TASKS, json=body(1, **options))
    assert first.status_code == 201, first.text
    task = first.json()
    created, run_at = (datetime.fromisoformat(task[k]) for k in ("created_at", "run_at"))
    assert run_at - created == timedelta(seconds=30)
    again = await api.post(TASKS, json=body(2, **options))
    assert again.status_code == 200, again.text
    assert (again.json()["id"], again.json()["run_at"]) == (task["id"], task["run_at"])


@pytest.mark.parametrize(
    "options",
    [
        {"debounce": {"key": "k", "window": 0}},
        {"debounce": {"key": "k", "window": 8 * 86_400}},
        {"debounce": {"key": "has space", "window": 1}},
        {"debounce": {"window": 10}},
        {"throttle": {"key": "k", "window": 1, "mode": "queue"}},
        {"throttle": {"key": "k", "window": 1, "limit": 0}},
        {"throttle": {"key": "k", "window": 1, "extra": 1}},
    ],
)
async def test_malformed_options_are_refused_naming_the_field(
    api: httpx.AsyncClient, options: dict[str, object]
) -> None:
    found = problem(await api.post(TASKS, json=body(1, **options)), 422)
    (name,) = options
    assert [e["field"].split(".")[0] for e in found["errors"]] == [name], found
