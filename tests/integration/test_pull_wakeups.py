"""Many long polls waiting on one queue, then tasks: each wake-up wakes as many polls as there
are new tasks, oldest first, so claims per task stay near one however many polls wait (issue 19:
every poll used to claim on every enqueue); and every task still goes to exactly one poll, with
none left waiting while a task is ready, also when the tasks come through another gateway.

Real Redis, gateway apps in-process (as the other pull tests); claims are counted where the
service makes them (``TaskStore.claim`` with a pull endpoint)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis

from gateway.store import keys
from gateway.store.keys import QueueKeys
from gateway.store.pubsub import Notifier
from gateway.store.tasks import Claim, TaskStore
from tests.integration.test_pull_api import gateway, lease, pull_queue, settings_for
from tests.support import until

ROOMY = {"max_concurrency": 1000}  # every poll may hold a task at once
POLL_WAIT = 50  # seconds: longer than any deadline below, so a stranded poll fails the test


@pytest.fixture
def pull_claims(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The endpoint of every pull claim made from now on, by any gateway of the test."""
    made: list[str] = []
    claim = TaskStore.claim

    async def counted(
        self: TaskStore, queue: str, count: int, seed: str, now_ms: int, **kw: Any
    ) -> Claim:
        if kw.get("endpoint_id"):
            made.append(kw["endpoint_id"])
        return await claim(self, queue, count, seed, now_ms, **kw)

    monkeypatch.setattr(TaskStore, "claim", counted)
    return made


def start_polls(
    api: httpx.AsyncClient, endpoint_id: str, n: int, max_tasks: int = 1
) -> list[asyncio.Task[httpx.Response]]:
    return [
        asyncio.create_task(lease(api, endpoint_id, wait=POLL_WAIT, max_tasks=max_tasks))
        for _ in range(n)
    ]


async def leased_ids(polls: list[asyncio.Task[httpx.Response]]) -> list[str]:
    ids = []
    for poll in polls:
        r = await poll
        assert r.status_code == 200, r.text
        ids += [t["id"] for t in r.json()["tasks"]]
    return ids


async def enqueue_batch(api: httpx.AsyncClient, n: int, **spec: Any) -> list[str]:
    r = await api.post(
        "/v1/queues/mail-out/tasks/batch",
        json={"tasks": [{"name": "send", "payload": {"args": [i]}, **spec} for i in range(n)]},
    )
    assert r.status_code == 201, r.text
    return [t["id"] for t in r.json()["tasks"]]


async def enqueue_one(api: httpx.AsyncClient) -> list[str]:
    r = await api.post("/v1/queues/mail-out/tasks", json={"name": "send", "payload": {}})
    assert r.status_code == 201, r.text
    return [str(r.json()["id"])]


def answered(polls: list[asyncio.Task[httpx.Response]]) -> int:
    return sum(poll.done() for poll in polls)


async def test_polls_waiting_for_tasks_enqueued_one_by_one_claim_about_once_per_task(
    redis_url: str, pull_claims: list[str]
) -> None:
    polls_n = 200
    async with gateway(settings_for(redis_url)) as (api, app):
        endpoint_id = await pull_queue(api, policy=ROOMY, concurrency=1000)
        polls = start_polls(api, endpoint_id, polls_n)
        await until(lambda: app.state.pull_waiters.waiting("mail-out") == polls_n, timeout=60)
        pull_claims.clear()
        enqueued = []
        for _ in range(polls_n):
            enqueued += await enqueue_one(api)
        leased = await asyncio.wait_for(leased_ids(polls), 30)
    assert sorted(leased) == sorted(enqueued)  # each task to exactly one poll
    print(f"\n{len(pull_claims)} claims for {len(enqueued)} tasks enqueued one by one")
    assert len(pull_claims) <= 1.5 * len(enqueued)


async def test_polls_waiting_for_batches_smaller_than_their_number_claim_about_once_per_task(
    redis_url: str, pull_claims: list[str]
) -> None:
    polls_n, batch, batches = 120, 30, 4
    async with gateway(settings_for(redis_url)) as (api, app):
        endpoint_id = await pull_queue(api, policy=ROOMY, concurrency=1000)
        polls = start_polls(api, endpoint_id, polls_n)
        await until(lambda: app.state.pull_waiters.waiting("mail-out") == polls_n, timeout=60)
        pull_claims.clear()
        enqueued = []
        for i in range(batches):
            enqueued += await enqueue_batch(api, batch)
            # Each batch is leased while the polls not woken for it sleep on.
            await until(lambda n=batch * (i + 1): answered(polls) == n, timeout=20)
        leased = await asyncio.wait_for(leased_ids(polls), 30)
    assert sorted(leased) == sorted(enqueued)
    print(f"\n{len(pull_claims)} claims for {len(enqueued)} tasks in batches of {batch}")
    assert len(pull_claims) <= 1.5 * len(enqueued)


async def test_polls_on_two_gateways_get_each_task_once_and_none_is_left_ready(
    redis_url: str, pull_claims: list[str]
) -> None:
    per_gateway = 40
    async with (
        Redis.from_url(redis_url) as redis,
        gateway(settings_for(redis_url)) as (api, app),
        gateway(settings_for(redis_url)) as (other, other_app),
    ):
        endpoint_id = await pull_queue(api, policy=ROOMY, concurrency=1000)
        polls = start_polls(api, endpoint_id, per_gateway)
        polls += start_polls(other, endpoint_id, per_gateway)

        def waiting() -> int:
            lines = app.state.pull_waiters, other_app.state.pull_waiters
            return sum(waiters.waiting("mail-out") for waiters in lines)

        await until(lambda: waiting() == 2 * per_gateway, timeout=60)
        pull_claims.clear()
        enqueued = []
        for _ in range(20):
            enqueued += await enqueue_one(other)
        enqueued += await enqueue_batch(api, 20)
        enqueued += await enqueue_batch(other, 20)
        # 60 tasks, 80 polls: every task leased well before any poll's wait ends, none left
        # ready, the other 20 polls still waiting.
        await until(lambda: answered(polls) == 60, timeout=20)
        assert await redis.zcard(QueueKeys.of("mail-out").ready) == 0
        await until(lambda: waiting() == 20, timeout=20)
        for _ in range(20):
            enqueued += await enqueue_one(api if len(enqueued) % 2 else other)
        leased = await asyncio.wait_for(leased_ids(polls), 20)
    assert sorted(leased) == sorted(enqueued)
    print(f"\n{len(pull_claims)} claims for {len(enqueued)} tasks, polls on two gateways")
    # Each gateway hands out its own wake-ups: a task announced to both may cost two claims.
    assert len(pull_claims) <= 2.5 * len(enqueued)


async def test_a_wake_up_that_does_not_say_how_many_is_handed_on_until_all_are_leased(
    redis_url: str, pull_claims: list[str]
) -> None:
    """Scheduled tasks made ready by the recoverer are announced without a number: one poll
    wakes, takes its fill, and hands the wake-up on while the claim says more are ready."""
    async with gateway(settings_for(redis_url, recover_interval=0.05)) as (api, app):
        endpoint_id = await pull_queue(api, policy=ROOMY, concurrency=1000)
        polls = start_polls(api, endpoint_id, 10, max_tasks=4)
        await until(lambda: app.state.pull_waiters.waiting("mail-out") == 10, timeout=60)
        pull_claims.clear()
        enqueued = await enqueue_batch(api, 20, delay=0.5)
        await until(lambda: answered(polls) == 5, timeout=20)
        assert app.state.pull_waiters.waiting("mail-out") == 5
        leased = []
        for poll in polls:
            if poll.done():
                leased += [t["id"] for t in (await poll).json()["tasks"]]
            else:
                poll.cancel()
    assert sorted(leased) == sorted(enqueued)
    print(f"\n{len(pull_claims)} claims for 20 tasks, 4 a poll, announced without a number")
    assert len(pull_claims) <= 8


async def test_the_notifier_reads_how_many_tasks_a_wake_message_announces(redis_url: str) -> None:
    heard: list[tuple[str, int | None]] = []
    async with Redis.from_url(redis_url, decode_responses=True) as redis:
        notifier = Notifier(redis, on_wake=lambda queue, ready: heard.append((queue, ready)))
        await notifier.start()
        try:
            for message in ("mail-out 12", "mail-out", "mail-out x"):
                await redis.publish(keys.WAKE_CHANNEL, message)
            await until(lambda: len(heard) == 3, what="three wake-ups")
        finally:
            await notifier.stop()
    assert heard == [("mail-out", 12), ("mail-out", None), ("mail-out", None)]
