"""Coalesced enqueues (sdk.coalescing) against a real gateway on loopback and a real Redis:
batches in call order, a refused member failing alone, dedup keys as for single enqueues,
request-wide refusals for everyone, and no wait for a lone call."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pytest

from gateway.app import create_app
from gateway.settings import ApiKey, Settings
from sdk import ApiError, AsyncClient, Client, Task, TaskState
from sdk.coalescing import WINDOW
from sdk.wire import TaskCreate, TaskReceipt
from tests.support import serve

KEY = "admin-key-0123456789"
QUEUE = "mail"
TASKS = f"/v1/queues/{QUEUE}/tasks"
BATCH = TASKS + "/batch"
NO_SUCH_TASK = "01J00000000000000000000009"


@dataclass
class Gateway:
    url: str
    requests: list[str] = field(default_factory=list)
    """The paths of the enqueue requests (POST) it received, in order."""
    minimal: list[bool] = field(default_factory=list)
    """Whether each of them asked for receipts (``Prefer: return=minimal``)."""


@pytest.fixture
async def gateway(redis_url: str) -> AsyncIterator[Gateway]:
    app = create_app(Settings(redis_url=redis_url, api_keys=[ApiKey(key=KEY, scopes=["admin"])]))
    requests: list[str] = []
    minimal: list[bool] = []

    async def counting(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and "/tasks" in scope["path"]:
            requests.append(scope["path"])
            minimal.append((b"prefer", b"return=minimal") in scope["headers"])
        await app(scope, receive, send)

    async with serve(counting) as url:
        async with AsyncClient(url, KEY, linger=None) as admin:
            await admin.put_queue(QUEUE, paused=True)
        yield Gateway(url, requests, minimal)


async def queued(gateway: Gateway) -> list[Any]:
    """The payloads of the queue's tasks in the order they will run."""
    async with AsyncClient(gateway.url, KEY, linger=None) as client:
        page = await client.list_tasks(QUEUE, TaskState.QUEUED, limit=500)
    return [t.payload for t in page.items]


async def test_calls_within_the_linger_share_one_request_in_call_order(gateway: Gateway) -> None:
    async with AsyncClient(gateway.url, KEY, linger=0.05) as client:
        tasks = await asyncio.gather(*(client.enqueue(QUEUE, "n", {"i": i}) for i in range(30)))
    assert gateway.requests == [BATCH]
    assert [t.payload for t in tasks] == [{"i": i} for i in range(30)]
    assert len({t.id for t in tasks}) == 30
    assert await queued(gateway) == [{"i": i} for i in range(30)]


async def test_by_default_only_calls_beyond_the_window_wait_to_share(gateway: Gateway) -> None:
    async with AsyncClient(gateway.url, KEY) as client:
        tasks = await asyncio.gather(*(client.enqueue(QUEUE, "n", {"i": i}) for i in range(40)))
    assert [t.payload for t in tasks] == [{"i": i} for i in range(40)]
    assert gateway.requests[:WINDOW] == [TASKS] * WINDOW  # sent at once, alone
    assert BATCH in gateway.requests
    assert len(gateway.requests) < 40
    assert sorted(p["i"] for p in await queued(gateway)) == list(range(40))


async def test_a_refused_member_fails_alone_and_the_others_keep_their_order(
    gateway: Gateway,
) -> None:
    async with AsyncClient(gateway.url, KEY, linger=0.05) as client:
        outcomes = await asyncio.gather(
            *(
                client.enqueue(QUEUE, "n", {"i": i}, depends_on=[NO_SUCH_TASK] if i == 2 else [])
                for i in range(5)
            ),
            return_exceptions=True,
        )
        with pytest.raises(ApiError) as alone:  # what the same enqueue gets on its own
            await client.enqueue(QUEUE, "n", {"i": 2}, depends_on=[NO_SUCH_TASK])
    refused = outcomes[2]
    assert isinstance(refused, ApiError)
    assert refused.status == alone.value.status == 422
    assert refused.problem == alone.value.problem
    assert [e.field for e in refused.problem.errors or ()] == ["depends_on"]
    assert [o.payload for o in outcomes if isinstance(o, Task)] == [{"i": i} for i in (0, 1, 3, 4)]
    assert await queued(gateway) == [{"i": i} for i in (0, 1, 3, 4)]
    # the refused batch, then the members between refusals together, the refused one alone
    assert gateway.requests == [BATCH, BATCH, TASKS, BATCH, TASKS]


async def test_dedup_keys_behave_as_for_single_enqueues(gateway: Gateway) -> None:
    async with AsyncClient(gateway.url, KEY, linger=0.05) as client:
        first = await client.enqueue(QUEUE, "n", {"i": 0}, dedup_key="k")
        tasks = await asyncio.gather(
            client.enqueue(QUEUE, "n", {"i": 1}, dedup_key="k"),
            client.enqueue(QUEUE, "n", {"i": 2}, dedup_key="m"),
            client.enqueue(QUEUE, "n", {"i": 3}, dedup_key="k"),
            client.enqueue(QUEUE, "n", {"i": 4}, dedup_key="m"),
        )
    assert [(t.deduplicated, t.payload) for t in tasks] == [
        (True, {"i": 0}),
        (False, {"i": 2}),
        (True, {"i": 0}),
        (True, {"i": 2}),
    ]
    assert tasks[0].id == tasks[2].id == first.id
    assert tasks[1].id == tasks[3].id != first.id
    assert gateway.requests == [TASKS, BATCH]
    assert await queued(gateway) == [{"i": 0}, {"i": 2}]


async def test_receipt_callers_share_a_batch_of_receipts_unless_one_wants_a_task(
    gateway: Gateway,
) -> None:
    async with AsyncClient(gateway.url, KEY, linger=0.05) as client:
        first = await client.enqueue_receipt(QUEUE, TaskCreate(name="n", dedup_key="k"))
        receipts = await asyncio.gather(
            *(client.enqueue_receipt(QUEUE, TaskCreate(name="n", payload=i)) for i in range(3)),
            client.enqueue_receipt(QUEUE, TaskCreate(name="n", dedup_key="k")),
        )
        mixed = await asyncio.gather(
            client.enqueue_receipt(QUEUE, TaskCreate(name="n", payload=10)),
            client.enqueue(QUEUE, "n", 11),
        )
    assert gateway.requests == [TASKS, BATCH, BATCH]
    assert gateway.minimal == [True, True, False]
    assert all(isinstance(r, TaskReceipt) for r in [first, *receipts, mixed[0]])
    assert isinstance(mixed[1], Task)
    assert mixed[1].payload == 11
    assert [(r.state, r.deduplicated) for r in receipts] == [(TaskState.QUEUED, False)] * 3 + [
        (TaskState.QUEUED, True)
    ]
    assert receipts[3].id == first.id
    assert await queued(gateway) == [None, 0, 1, 2, 10, 11]


async def test_a_refusal_of_the_whole_request_is_every_members_error(gateway: Gateway) -> None:
    async with AsyncClient(gateway.url, KEY, linger=0.05) as client:
        outcomes = await asyncio.gather(
            *(client.enqueue("nope", "n", i) for i in range(3)), return_exceptions=True
        )
    assert [o.status for o in outcomes if isinstance(o, ApiError)] == [404, 404, 404]
    assert gateway.requests == ["/v1/queues/nope/tasks/batch"]  # not sent again


async def test_a_lone_call_goes_at_once_and_alone(gateway: Gateway) -> None:
    async with AsyncClient(gateway.url, KEY) as client:  # the default linger, 0
        task = await client.enqueue(QUEUE, "n", 1)
    assert gateway.requests == [TASKS]
    assert not task.deduplicated


async def test_a_lone_call_waits_no_longer_than_the_linger(gateway: Gateway) -> None:
    async with AsyncClient(gateway.url, KEY, linger=0.3) as client:
        started = time.monotonic()
        await client.enqueue(QUEUE, "n", 1)
        took = time.monotonic() - started
    assert 0.3 <= took < 0.3 + 5  # generous: a loaded machine, but not a second linger
    assert gateway.requests == [TASKS]  # a batch of one goes as a single enqueue


async def test_a_caller_cancelled_before_its_batch_goes_is_not_sent(gateway: Gateway) -> None:
    async with AsyncClient(gateway.url, KEY, linger=0.2) as client:
        gone = asyncio.create_task(client.enqueue(QUEUE, "n", {"i": 0}))
        kept = asyncio.create_task(client.enqueue(QUEUE, "n", {"i": 1}))
        await asyncio.sleep(0)  # both have joined the batch
        gone.cancel()
        await kept
    assert gone.cancelled()
    assert await queued(gateway) == [{"i": 1}]


async def test_threads_share_a_batch_through_the_blocking_client(gateway: Gateway) -> None:
    def produce() -> list[Any]:
        with (
            Client(gateway.url, KEY, linger=0.2) as client,
            ThreadPoolExecutor(8) as pool,
        ):

            def one(i: int) -> Task | ApiError:
                depends_on = [NO_SUCH_TASK] if i == 5 else []
                try:
                    return client.enqueue(QUEUE, "n", {"i": i}, depends_on=depends_on)
                except ApiError as e:
                    return e

            return list(pool.map(one, range(8)))

    outcomes = await asyncio.to_thread(produce)
    refused = outcomes[5]
    assert isinstance(refused, ApiError)
    assert refused.status == 422
    created = [o.payload for o in outcomes if isinstance(o, Task)]
    assert sorted(p["i"] for p in created) == [0, 1, 2, 3, 4, 6, 7]
    assert gateway.requests[0] == BATCH
    assert len(gateway.requests) < 8


async def test_threads_asking_for_receipts_or_tasks_each_get_what_they_asked_for(
    gateway: Gateway,
) -> None:
    def produce() -> list[Task | TaskReceipt]:
        with Client(gateway.url, KEY, linger=0.2) as client, ThreadPoolExecutor(6) as pool:

            def one(i: int) -> Task | TaskReceipt:
                if i % 2:
                    return client.enqueue(QUEUE, "n", i)
                return client.enqueue_receipt(QUEUE, TaskCreate(name="n", payload=i))

            return list(pool.map(one, range(6)))

    outcomes = await asyncio.to_thread(produce)
    assert [type(o) for o in outcomes] == [TaskReceipt, Task] * 3
    assert sorted(await queued(gateway)) == list(range(6))
    assert len({o.id for o in outcomes}) == 6


async def test_threads_meeting_a_request_in_flight_share_the_next_one(gateway: Gateway) -> None:
    def produce() -> list[Task]:
        with Client(gateway.url, KEY) as client, ThreadPoolExecutor(8) as pool:  # linger=0
            together = threading.Barrier(8)

            def one(i: int) -> Task:
                together.wait()
                return client.enqueue(QUEUE, "n", {"i": i})

            return list(pool.map(one, range(8)))

    tasks = await asyncio.to_thread(produce)
    assert [t.payload for t in tasks] == [{"i": i} for i in range(8)]
    assert gateway.requests[0] == TASKS  # the first went at once, alone
    assert BATCH in gateway.requests
    assert len(gateway.requests) < 8
    assert sorted(p["i"] for p in await queued(gateway)) == list(range(8))
