"""Per-name and per-key rate limits (issue 11), checked by the claim script against a real
Redis with a manual clock; and, through the API in-process, their validation and the key a task
gets at enqueue."""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis
from ulid import ULID

from gateway.settings import ApiKey, Settings
from gateway.store.keys import QueueKeys
from gateway.store.records import NewTask
from gateway.store.tasks import ClaimStatus
from sdk.wire import KeyRateLimit, RateLimit
from tests.support import gateway_client, until

from .conftest import Stores
from .test_flow_control import queue


def task(now: int, name: str = "t", rate_key: str | None = None) -> NewTask:
    return NewTask(
        id=str(ULID()),
        name=name,
        payload_json="null",
        priority=0,
        created_ms=now,
        run_at_ms=now,
        rate_key=rate_key,
    )


KEYED = KeyRateLimit(path="customer_id", per_second=4, burst=1)


async def claim_names(s: Stores, count: int) -> list[str]:
    claim = await s.tasks.claim("q", count, "seed", s.clock.now_ms())
    return [x.name for x in claim.leases]


async def ready_ids(s: Stores) -> list[str]:
    return [m[-26:] for m in await s.redis.zrange(QueueKeys.of("q").ready, 0, -1)]


async def test_a_task_name_limit_holds_and_other_names_go_on(stores: Stores) -> None:
    await queue(stores, task_rate_limits={"slow": RateLimit(per_second=5, burst=2)})
    now = stores.clock.now_ms()
    tasks = [task(now, name=name) for _ in range(5) for name in ("slow", "fast")]
    await stores.tasks.enqueue("q", tasks, now)
    assert sorted(await claim_names(stores, 10)) == ["fast"] * 5 + ["slow"] * 2
    assert await claim_names(stores, 10) == []
    stores.clock.advance(200)  # one token at 5/s
    assert await claim_names(stores, 10) == ["slow"]


async def test_a_key_limit_holds_per_key_and_skipped_tasks_keep_their_order(
    stores: Stores,
) -> None:
    await queue(stores, key_rate_limit=KEYED)
    now = stores.clock.now_ms()
    flood = [task(now, rate_key="A") for _ in range(20)]
    others = [task(now, rate_key="B"), task(now), task(now, rate_key="C")]
    await stores.tasks.enqueue("q", [*flood, *others], now)
    claim = await stores.tasks.claim("q", 10, "seed", now)
    # One of A (burst 1); B, C and the task without a key are not held back by A's flood.
    assert [x.task_id for x in claim.leases] == [flood[0].id, *(t.id for t in others)]
    # Tasks held by a bucket go when it refills: the dispatcher must claim again to hear when.
    assert not claim.settled
    assert await ready_ids(stores) == [t.id for t in flood[1:]]  # untouched, in order
    stores.clock.advance(250)
    claim = await stores.tasks.claim("q", 10, "seed", stores.clock.now_ms())
    assert [x.task_id for x in claim.leases] == [flood[1].id]


async def test_when_only_limited_tasks_wait_the_claim_says_when_a_token_comes(
    stores: Stores,
) -> None:
    await queue(
        stores,
        key_rate_limit=KEYED,
        task_rate_limits={"t": RateLimit(per_second=2, burst=1)},
    )
    now = stores.clock.now_ms()
    await stores.tasks.enqueue("q", [task(now, rate_key="A") for _ in range(3)], now)
    assert len((await stores.tasks.claim("q", 10, "s", now)).leases) == 1
    stores.clock.advance(100)
    claim = await stores.tasks.claim("q", 10, "s", stores.clock.now_ms())
    # The key's bucket (4/s) has a token in 150 ms, the name's (2/s) in 400: the later counts.
    assert claim.status is ClaimStatus.RATE
    assert claim.retry_at_ms == now + 500
    assert claim.held  # a new task of another key could go before: the dispatcher listens
    stores.clock.advance(399)
    assert (await stores.tasks.claim("q", 10, "s", stores.clock.now_ms())).retry_at_ms == now + 500
    stores.clock.advance(1)
    assert len((await stores.tasks.claim("q", 10, "s", stores.clock.now_ms())).leases) == 1


async def test_a_flood_of_one_key_costs_a_bounded_scan(stores: Stores) -> None:
    await queue(stores, key_rate_limit=KEYED)
    now = stores.clock.now_ms()
    flood = [task(now, rate_key="A") for _ in range(100)]
    late = task(now, rate_key="B")
    await stores.tasks.enqueue("q", [*flood, late], now)
    assert len((await stores.tasks.claim("q", 1, "s", now)).leases) == 1
    # The next claim of 1 looks at 4 x 1 + 64 tasks of A, not at all 99: B, behind them, waits.
    claim = await stores.tasks.claim("q", 1, "s", now)
    assert claim.status is ClaimStatus.RATE
    assert claim.retry_at_ms == now + 250
    # A claim of 10 looks further (4 x 10 + 64 = 104) and finds it.
    claim = await stores.tasks.claim("q", 10, "s", now)
    assert [x.task_id for x in claim.leases] == [late.id]


async def test_buckets_are_kept_only_until_full_again(stores: Stores) -> None:
    k = QueueKeys.of("q")
    await queue(stores, key_rate_limit=KeyRateLimit(path="c", per_second=10, burst=2))
    now = stores.clock.now_ms()
    await stores.tasks.enqueue("q", [task(now, rate_key=key) for key in "AB"], now)
    await stores.tasks.claim("q", 10, "s", now)
    assert await stores.redis.hgetall(k.rates) == {"k:A": f"1:{now}", "k:B": f"1:{now}"}
    assert await stores.redis.zrange(k.rates_full, 0, -1, withscores=True) == [
        ("k:A", now + 100),
        ("k:B", now + 100),
    ]
    assert 0 < await stores.redis.pttl(k.rates) <= 100
    assert 0 < await stores.redis.pttl(k.rates_full) <= 100
    # A later claim that writes a bucket drops those full by now, whatever the keys' TTL.
    stores.clock.advance(100)
    now = stores.clock.now_ms()
    await stores.tasks.enqueue("q", [task(now, rate_key="C")], now)
    await stores.tasks.claim("q", 10, "s", now)
    assert await stores.redis.hgetall(k.rates) == {"k:C": f"1:{now}"}

    # And with nothing more to claim, both keys are gone once C's bucket is full (real time).
    async def gone() -> bool:
        return await stores.redis.exists(k.rates, k.rates_full) == 0

    await until(gone, what="expiry")


async def test_without_such_limits_the_claim_writes_no_bucket(stores: Stores) -> None:
    await queue(stores, rate_limit=RateLimit(per_second=100, burst=5))
    now = stores.clock.now_ms()
    await stores.tasks.enqueue("q", [task(now, rate_key="A") for _ in range(3)], now)
    assert len((await stores.tasks.claim("q", 10, "s", now)).leases) == 3
    k = QueueKeys.of("q")
    assert await stores.redis.exists(k.rates, k.rates_full) == 0


# --- through the API -------------------------------------------------------------------------

ADMIN = "admin-key-0123456789"


@pytest.fixture
async def api(redis_url: str) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(redis_url=redis_url, api_keys=[ApiKey(key=ADMIN, scopes=["admin"])])
    async with gateway_client(settings, ADMIN) as client:
        yield client


def fields(r: httpx.Response) -> set[str]:
    assert r.status_code == 422, r.text
    return {e["field"] for e in r.json()["errors"]}


@pytest.mark.parametrize(
    ("policy", "field"),
    [
        ({"key_rate_limit": {"path": "a..b", "per_second": 1}}, "key_rate_limit.path"),
        ({"key_rate_limit": {"path": "a.b.c.d.e.f.g.h.i", "per_second": 1}}, "key_rate_limit.path"),
        ({"key_rate_limit": {"path": "a b", "per_second": 1}}, "key_rate_limit.path"),
        ({"key_rate_limit": {"path": "a", "per_second": 0}}, "key_rate_limit.per_second"),
        ({"key_rate_limit": {"per_second": 1}}, "key_rate_limit.path"),
        ({"task_rate_limits": {"t": {"per_second": 1, "burst": 0}}}, "task_rate_limits.t.burst"),
        ({"task_rate_limits": {"t": {"per_second": -1}}}, "task_rate_limits.t.per_second"),
        (
            {"task_rate_limits": {f"t{i}": {"per_second": 1} for i in range(101)}},
            "task_rate_limits",
        ),
    ],
)
async def test_bad_limits_are_refused_naming_the_field(
    api: httpx.AsyncClient, policy: dict[str, Any], field: str
) -> None:
    assert fields(await api.put("/v1/queues/q", json=policy)) == {field}
    await api.put("/v1/queues/q", json={})
    assert fields(await api.patch("/v1/queues/q", json=policy)) == {field}


async def test_limits_are_set_patched_and_removed(api: httpx.AsyncClient) -> None:
    r = await api.put("/v1/queues/q", json={})
    assert r.json()["policy"]["task_rate_limits"] == {}
    assert r.json()["policy"]["key_rate_limit"] is None
    key = {"path": "kwargs.customer_id", "per_second": 5, "burst": 2}
    r = await api.patch(
        "/v1/queues/q",
        json={"key_rate_limit": key, "task_rate_limits": {"mail.send": {"per_second": 1}}},
    )
    assert r.status_code == 200, r.text
    assert r.json()["policy"]["key_rate_limit"] == key
    assert r.json()["policy"]["task_rate_limits"] == {"mail.send": {"per_second": 1, "burst": 1}}
    r = await api.patch("/v1/queues/q", json={"key_rate_limit": key, "remove_key_rate_limit": True})
    assert fields(r) == {"remove_key_rate_limit"}
    r = await api.patch(
        "/v1/queues/q", json={"remove_key_rate_limit": True, "task_rate_limits": {}}
    )
    assert r.json()["policy"]["key_rate_limit"] is None
    assert r.json()["policy"]["task_rate_limits"] == {}


async def test_enqueue_keeps_the_key_found_at_the_path(
    api: httpx.AsyncClient, redis_url: str
) -> None:
    key = {"path": "kwargs.customer_id", "per_second": 5}
    await api.put("/v1/queues/q", json={"key_rate_limit": key})
    payloads = [
        {"kwargs": {"customer_id": "acme"}},
        {"kwargs": {"customer_id": 42}},
        {"kwargs": {"customer_id": "x" * 129}},
        {"kwargs": {"customer_id": 1.5}},
        {"kwargs": {}},
        ["not", "a", "dict"],
    ]
    r = await api.post(
        "/v1/queues/q/tasks/batch",
        json={"tasks": [{"name": "t", "payload": p} for p in payloads]},
    )
    assert r.status_code == 201, r.text
    ids = [t["id"] for t in r.json()["tasks"]]
    async with Redis.from_url(redis_url, decode_responses=True) as redis:
        records = [json.loads(raw) for raw in await redis.hmget(QueueKeys.of("q").meta, ids)]
    assert [rec.get("rk") for rec in records] == [
        "acme",
        "42",
        hashlib.sha1(b"x" * 129).hexdigest(),
        None,
        None,
        None,
    ]
