"""Task names no endpoint reported (issue 31: ``greet`` for ``tasks.greet`` got 201, then died
with "Unknown task"): once an endpoint of a queue has reported its task names, the queue's
policy ``unknown_tasks`` (default ``refuse``) refuses the others with 422 of problem type
``unknown-task-name``, naming the closest reported names; ``accept`` lets them through, and a
queue whose endpoints reported nothing accepts every name."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis

from gateway.settings import ApiKey, Settings
from gateway.store.keys import QueueKeys
from sdk import AsyncClient
from sdk.errors import ApiError
from tests.support import gateway_client

ADMIN = "admin-key-0123456789"
UNKNOWN = "tag:jobgate.dev,2026:problem/unknown-task-name"
ANY: dict[str, Any] = {"type": ["object", "null"]}
HELLO = [
    {"name": "tasks.greet", "schema": ANY},
    {"name": "tasks.slow_count", "schema": ANY},
]
DETAIL = (
    "queue 'hello' refuses task names no endpoint of it reported (its policy's unknown_tasks "
    "is 'refuse'; 'accept' lets them through)"
)


@pytest.fixture
async def api(redis_url: str) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(
        redis_url=redis_url,
        allow_private_endpoints=True,
        api_keys=[ApiKey(key=ADMIN, scopes=["admin"])],
    )
    async with gateway_client(settings, ADMIN) as client:
        assert (await client.put("/v1/queues/hello", json={})).status_code == 201
        yield client


async def register(api: httpx.AsyncClient, tasks: list[dict[str, Any]] | None) -> None:
    body: dict[str, Any] = {"url": "http://127.0.0.1:9001/"}
    if tasks is not None:
        body["tasks"] = tasks
    response = await api.post("/v1/queues/hello/endpoints", json=body)
    assert response.status_code == 201, response.text


async def stored(redis_url: str) -> int:
    async with Redis.from_url(redis_url, decode_responses=True) as redis:
        return int(await redis.hlen(QueueKeys.of("hello").meta))


def refusal(response: httpx.Response) -> dict[str, str]:
    assert response.status_code == 422, response.text
    problem = response.json()
    assert (problem["type"], problem["title"]) == (UNKNOWN, "Unknown task name")
    assert problem["detail"] == DETAIL
    return {e["field"]: e["reason"] for e in problem["errors"]}


async def test_a_misspelled_name_is_refused_with_the_closest_names(
    api: httpx.AsyncClient, redis_url: str
) -> None:
    await register(api, HELLO)
    for name, hint in [
        ("greet", "did you mean 'tasks.greet'?"),  # the function's name, not the task's
        ("tasks.gret", "did you mean 'tasks.greet'?"),
        ("tasks.count", "did you mean 'tasks.slow_count'?"),
        ("nothing_like_it", "they reported 'tasks.greet', 'tasks.slow_count' "),
    ]:
        response = await api.post("/v1/queues/hello/tasks", json={"name": name})
        (reason,) = refusal(response).values()
        assert list(refusal(response)) == ["name"]
        assert reason.startswith(f"no endpoint of queue 'hello' reported a task named '{name}'; ")
        assert hint in reason, reason
    assert reason.endswith("(GET /v1/tasks?queue=hello)")
    assert await stored(redis_url) == 0
    ok = await api.post("/v1/queues/hello/tasks", json={"name": "tasks.greet"})
    assert ok.status_code == 201, ok.text


async def test_a_batch_with_one_misspelled_name_stores_nothing(
    api: httpx.AsyncClient, redis_url: str
) -> None:
    await register(api, HELLO)
    good = {"name": "tasks.greet", "payload": {"args": ["Ada"]}}
    response = await api.post(
        "/v1/queues/hello/tasks/batch",
        json={"tasks": [good, {"name": "tasks.greeet"}, good, {"name": "tasks.slow_count"}]},
    )
    assert refusal(response) == {
        "tasks.1.name": "no endpoint of queue 'hello' reported a task named 'tasks.greeet'; "
        "did you mean 'tasks.greet'?"
    }
    assert await stored(redis_url) == 0


async def test_a_refusal_names_payload_problems_of_known_names_too(
    api: httpx.AsyncClient,
) -> None:
    strict = {"name": "tasks.greet", "schema": {"type": "object", "required": ["args"]}}
    await register(api, [strict])
    response = await api.post(
        "/v1/queues/hello/tasks/batch",
        json={"tasks": [{"name": "tasks.greet", "payload": {}}, {"name": "greet"}]},
    )
    assert list(refusal(response)) == ["tasks.0.payload.args", "tasks.1.name"]


async def test_accepted_when_the_policy_is_off(api: httpx.AsyncClient, redis_url: str) -> None:
    await register(api, HELLO)
    patched = await api.patch("/v1/queues/hello", json={"unknown_tasks": "accept"})
    assert patched.status_code == 200, patched.text
    assert patched.json()["policy"]["unknown_tasks"] == "accept"
    response = await api.post("/v1/queues/hello/tasks", json={"name": "greet"})
    assert response.status_code == 201, response.text
    batch = await api.post("/v1/queues/hello/tasks/batch", json={"tasks": [{"name": "x"}]})
    assert batch.status_code == 201, batch.text
    assert await stored(redis_url) == 2


async def test_accepted_when_no_catalog_was_reported(
    api: httpx.AsyncClient, redis_url: str
) -> None:
    policy = (await api.get("/v1/queues/hello")).json()["policy"]
    assert policy["unknown_tasks"] == "refuse"  # the default
    assert (await api.post("/v1/queues/hello/tasks", json={"name": "greet"})).status_code == 201
    await register(api, None)  # an endpoint that reports nothing
    assert (await api.post("/v1/queues/hello/tasks", json={"name": "greet"})).status_code == 201
    await register(api, [])  # nor does an empty list
    assert (await api.post("/v1/queues/hello/tasks", json={"name": "greet"})).status_code == 201
    assert await stored(redis_url) == 3


async def test_a_disabled_endpoints_names_are_still_known(
    api: httpx.AsyncClient, redis_url: str
) -> None:
    """A disabled endpoint (one that answered 410) may come back: its names wait in the queue
    rather than being refused."""
    await register(api, HELLO)
    async with Redis.from_url(redis_url, decode_responses=True) as redis:
        k = QueueKeys.of("hello")
        (endpoint_id, raw) = next(iter((await redis.hgetall(k.endpoints)).items()))
        await redis.hset(k.endpoints, endpoint_id, raw.replace('"enabled":true', '"enabled":false'))
    listed = await api.get("/v1/tasks", params={"queue": "hello"})  # read afresh
    assert [i["served"] for i in listed.json()["items"]] == [False, False]
    ok = await api.post("/v1/queues/hello/tasks", json={"name": "tasks.greet"})
    assert ok.status_code == 201, ok.text


async def test_the_sdk_shows_the_refusal_readably(api: httpx.AsyncClient) -> None:
    await register(api, HELLO)
    transport = api._transport  # the in-process gateway
    assert isinstance(transport, httpx.AsyncBaseTransport)
    async with AsyncClient("http://gateway", ADMIN, transport=transport) as client:
        with pytest.raises(ApiError) as refused:
            await client.enqueue("hello", "greet", {"args": ["Ada"]})
    assert refused.value.status == 422
    assert refused.value.problem.type == UNKNOWN
    assert str(refused.value) == (
        f"422 Unknown task name: {DETAIL}\n"
        "  name: no endpoint of queue 'hello' reported a task named 'greet'; "
        "did you mean 'tasks.greet'?"
    )
