"""The Idempotency-Key header on POST routes, in-process against a real Redis: replays, reuse
with another body, concurrent repeats, error answers not kept, callbacks untouched, and what it
leaves in Redis."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.api.idempotency import fingerprint
from gateway.app import create_app
from gateway.settings import ApiKey, Settings
from gateway.store.idempotency import Answered, IdempotencyStore, InProgress, slot
from gateway.store.keys import task_index
from gateway.store.scripts import Scripts
from sdk.wire import HEADER_CALLBACK, HEADER_LEASE
from tests.support import serve, until

ADMIN = "admin-key-0123456789"
PRODUCER = "producer-key-0123456789"
TTL = 3600
TASKS = "/v1/queues/mail-out/tasks"


@pytest.fixture
async def api(redis_url: str) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(
        redis_url=redis_url,
        idempotency_ttl=TTL,
        allow_private_endpoints=True,
        api_keys=[
            ApiKey(key=ADMIN, scopes=["admin"], name="ops"),
            ApiKey(key=PRODUCER, scopes=["enqueue:mail-*"], name="mailer"),
        ],
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app) as state:

        async def with_state(scope: Any, receive: Any, send: Any) -> None:
            scope["state"] = dict(state)
            await app(scope, receive, send)

        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=with_state),
            base_url="http://gateway",
            headers={"authorization": f"Bearer {ADMIN}"},
        ) as client:
            assert (await client.put("/v1/queues/mail-out", json={})).status_code == 201
            yield client


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[Redis]:
    async with Redis.from_url(redis_url, decode_responses=True) as client:
        yield client


def keyed(key: str, **headers: str) -> dict[str, str]:
    return {"idempotency-key": key, **headers}


async def queued(api: httpx.AsyncClient, queue: str = "mail-out") -> list[str]:
    page = (await api.get(f"/v1/queues/{queue}/tasks", params={"state": "queued"})).json()
    return [item["id"] for item in page["items"]]


async def idem_keys(redis: Redis) -> list[str]:
    return sorted([key async for key in redis.scan_iter("jg:idem:*")])


def problem(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    return dict(response.json())


async def test_a_repeat_gets_the_first_answer_as_200_with_the_replayed_header(
    api: httpx.AsyncClient,
) -> None:
    body = {"name": "send", "payload": {"to": "a@example.com"}}
    first = await api.post(TASKS, json=body, headers=keyed("order-1"))
    assert first.status_code == 201
    assert "idempotent-replayed" not in first.headers
    again = await api.post(TASKS, json=body, headers=keyed("order-1"))
    assert again.status_code == 200
    assert again.headers["idempotent-replayed"] == "true"
    assert again.headers["content-type"] == "application/json"
    assert again.content == first.content
    assert await queued(api) == [first.json()["id"]]
    # No key, or another key: a new task each time.
    assert (await api.post(TASKS, json=body)).status_code == 201
    assert (await api.post(TASKS, json=body, headers=keyed("order-2"))).status_code == 201
    assert len(await queued(api)) == 3


async def test_a_repeat_gets_the_first_answers_shape_whatever_it_prefers(
    api: httpx.AsyncClient,
) -> None:
    body = {"name": "send"}
    first = await api.post(TASKS, json=body, headers=keyed("m", prefer="return=minimal"))
    assert first.headers["preference-applied"] == "return=minimal"
    again = await api.post(TASKS, json=body, headers=keyed("m"))
    assert again.status_code == 200
    assert again.content == first.content
    assert again.headers["preference-applied"] == "return=minimal"  # it says what it is
    full = await api.post(TASKS, json=body, headers=keyed("f"))
    replayed = await api.post(TASKS, json=body, headers=keyed("f", prefer="return=minimal"))
    assert replayed.content == full.content
    assert "preference-applied" not in replayed.headers


async def test_keys_are_scoped_to_the_api_key_and_the_path(api: httpx.AsyncClient) -> None:
    body = {"name": "send"}
    mine = await api.post(TASKS, json=body, headers=keyed("k"))
    theirs = await api.post(
        TASKS, json=body, headers=keyed("k", authorization=f"Bearer {PRODUCER}")
    )
    batch = await api.post(f"{TASKS}/batch", json={"tasks": [body]}, headers=keyed("k"))
    assert (mine.status_code, theirs.status_code, batch.status_code) == (201, 201, 201)
    assert len({mine.json()["id"], theirs.json()["id"], batch.json()["tasks"][0]["id"]}) == 3


async def test_the_same_key_with_another_body_or_query_is_refused(
    api: httpx.AsyncClient, redis: Redis
) -> None:
    first = await api.post(TASKS, json={"name": "send", "priority": 1}, headers=keyed("k"))
    assert first.status_code == 201
    stored = await idem_keys(redis)
    for response in [
        await api.post(TASKS, json={"name": "send", "priority": 2}, headers=keyed("k")),
        await api.post(
            TASKS, json={"name": "send", "priority": 1}, headers=keyed("k"), params={"x": "1"}
        ),
    ]:
        found = problem(response, 409)  # the body is valid: only the key's history refuses it
        assert found["type"] == "tag:jobgate.dev,2026:problem/idempotency-key-reused"
        assert "Idempotency-Key reused with a different request body" in found["detail"]
    assert await queued(api) == [first.json()["id"]]
    assert await idem_keys(redis) == stored


async def test_concurrent_repeats_run_once(api: httpx.AsyncClient) -> None:
    body = {"name": "send", "payload": {"n": 1}}
    answers = await asyncio.gather(
        *(api.post(TASKS, json=body, headers=keyed("burst")) for _ in range(20))
    )
    statuses = [a.status_code for a in answers]
    assert statuses.count(201) == 1, statuses
    assert set(statuses) <= {200, 201, 409}, statuses
    ids = {a.json()["id"] for a in answers if a.status_code < 300}
    assert len(ids) == 1
    for answer in answers:
        if answer.status_code == 409:
            assert answer.headers["retry-after"] == "1"
            problem(answer, 409)
        elif answer.status_code == 200:
            assert answer.headers["idempotent-replayed"] == "true"
    assert await queued(api) == list(ids)


async def test_a_request_still_running_gets_409(api: httpx.AsyncClient, redis: Redis) -> None:
    body = b'{"name":"send"}'
    store = IdempotencyStore(redis, Scripts(redis), ttl_ms=TTL * 1000)
    record = slot("ops", "POST", TASKS, "held")
    other_gateway = InProgress(fingerprint("", body), "token-of-another-gateway")
    assert await store.claim(record, other_gateway) is None
    held = await api.post(TASKS, content=body, headers=keyed("held"))
    assert "still running" in problem(held, 409)["detail"]
    assert held.headers["retry-after"] == "1"
    assert await queued(api) == []
    # The holder fails (or crashes and its marker expires): the retry runs.
    assert await store.release(record, other_gateway)
    assert (await api.post(TASKS, content=body, headers=keyed("held"))).status_code == 201


async def test_error_answers_are_not_kept(api: httpx.AsyncClient, redis: Redis) -> None:
    # Refused before it runs (a field breaks the schema), then corrected.
    problem(await api.post(TASKS, json={"name": "has space"}, headers=keyed("a")), 422)
    assert await idem_keys(redis) == []
    assert (await api.post(TASKS, json={"name": "send"}, headers=keyed("a"))).status_code == 201
    # Refused while it runs (the queue is not registered yet), then retried as it was.
    other = "/v1/queues/mail-later/tasks"
    problem(await api.post(other, json={"name": "send"}, headers=keyed("b")), 404)
    assert len(await idem_keys(redis)) == 1
    assert (await api.put("/v1/queues/mail-later", json={})).status_code == 201
    retried = await api.post(other, json={"name": "send"}, headers=keyed("b"))
    assert retried.status_code == 201
    assert await queued(api, "mail-later") == [retried.json()["id"]]


@pytest.mark.parametrize("value", [b"", b" ", b"x" * 256, b"caf\xc3\xa9", b"tab\there"], ids=repr)
async def test_a_malformed_key_is_400_naming_the_header(
    api: httpx.AsyncClient, redis: Redis, value: bytes
) -> None:
    response = await api.post(TASKS, json={"name": "send"}, headers={b"idempotency-key": value})
    assert "Idempotency-Key" in problem(response, 400)["detail"]
    assert await queued(api) == []
    assert await idem_keys(redis) == []


async def test_any_post_is_covered_and_other_methods_ignore_the_header(
    api: httpx.AsyncClient, redis: Redis
) -> None:
    task = (await api.post(TASKS, json={"name": "send"})).json()
    cancel = f"/v1/tasks/{task['id']}/cancel"
    first = await api.post(cancel, headers=keyed("stop"))
    assert first.status_code == 200
    assert first.json()["state"] == "cancelled"
    again = await api.post(cancel, headers=keyed("stop"))
    assert (again.status_code, again.content) == (200, first.content)
    assert again.headers["idempotent-replayed"] == "true"
    problem(await api.post(cancel, headers=keyed("stop-2")), 409)  # a new key runs again
    # PUT is idempotent already: the header changes nothing and nothing is kept for it.
    before = await idem_keys(redis)
    for _ in range(2):
        put = await api.put("/v1/queues/mail-out", json={}, headers=keyed("put"))
        assert put.status_code == 200
        assert "idempotent-replayed" not in put.headers
    assert await idem_keys(redis) == before


@dataclass
class Worker:
    """Accepts every push with 202 and remembers its lease token and callback URL."""

    leases: list[tuple[str, str]] = field(default_factory=list)

    async def push(self, request: Request) -> Response:
        await request.body()
        self.leases.append((request.headers[HEADER_LEASE], request.headers[HEADER_CALLBACK]))
        return Response(status_code=202)


async def test_worker_callbacks_ignore_the_header(api: httpx.AsyncClient, redis: Redis) -> None:
    worker = Worker()
    app = Starlette(routes=[Route("/", worker.push, methods=["POST"])])
    async with serve(app) as url:
        added = await api.post("/v1/queues/mail-out/endpoints", json={"url": f"{url}/"})
        assert added.status_code == 201
        task_id = (await api.post(TASKS, json={"name": "send"})).json()["id"]
        await until(lambda: worker.leases, what="the push")
    lease, callback = worker.leases[0]
    path = httpx.URL(callback).path.rstrip("/")
    assert task_id in path
    before = await idem_keys(redis)
    log = {"lines": [{"message": "halfway"}]}
    for _ in range(2):
        answer = await api.post(
            f"{path}/logs", json=log, headers={HEADER_LEASE: lease, "idempotency-key": "same"}
        )
        assert answer.status_code == 200, answer.text
        assert "idempotent-replayed" not in answer.headers
    lines = (await api.get(f"/v1/tasks/{task_id}/logs")).json()["items"]
    assert [line["message"] for line in lines] == ["halfway", "halfway"]
    assert await idem_keys(redis) == before


async def test_only_answered_keys_remain_and_each_expires(
    api: httpx.AsyncClient, redis: Redis
) -> None:
    body = {"name": "send"}
    ids = set()
    for key in ["one", "two", "one"]:
        ids.add((await api.post(TASKS, json=body, headers=keyed(key))).json()["id"])
    await api.post(TASKS, json={"name": "bad name"}, headers=keyed("three"))
    await api.post("/v1/queues/nowhere/tasks", json=body, headers=keyed("four"))
    records = await idem_keys(redis)
    assert records == sorted(slot("ops", "POST", TASKS, key) for key in ["one", "two"])
    for record in records:
        assert 0 < await redis.pttl(record) <= TTL * 1000
        assert '"status":201' in (await redis.get(record) or "")
    others = {key async for key in redis.scan_iter("*") if not key.startswith("jg:idem:")}
    assert {key for key in others if not key.startswith("jg:{mail-out}:")} == {
        "jg:queues",
        *(task_index(task_id) for task_id in ids),
    }


async def test_an_expired_marker_is_not_overwritten_by_its_late_holder(redis: Redis) -> None:
    store = IdempotencyStore(redis, Scripts(redis), ttl_ms=TTL * 1000)
    record = slot("ops", "POST", TASKS, "slow")
    late, now = InProgress("fp", "late"), InProgress("fp", "now")
    assert await store.claim(record, now) is None  # the late one's marker expired before
    assert not await store.release(record, late)
    assert not await store.keep(record, late, Answered("fp", 201, "application/json", "{}"))
    assert await store.claim(record, late) == now
    assert 0 < await redis.pttl(record) <= 60_000
