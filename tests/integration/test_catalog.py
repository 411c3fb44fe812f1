"""The task catalog through the HTTP API, against a real Redis: endpoints report their tasks,
``GET /v1/tasks`` lists them, and enqueues of cataloged names are checked against their schema."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from pydantic import BaseModel
from redis.asyncio import Redis

from gateway.settings import ApiKey, Settings
from gateway.store.keys import QueueKeys
from tests.support import gateway_client

ADMIN = "admin-key-0123456789"
READER = "reader-key-0123456789"
PRODUCER = "producer-key-0123456789"

RESIZE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "args": {"type": "array", "maxItems": 0},
        "kwargs": {
            "type": "object",
            "properties": {
                "width": {"type": "integer", "minimum": 1},
                "path": {"type": "string"},
            },
            "required": ["width"],
            "additionalProperties": False,
        },
    },
    "required": ["kwargs"],
    "additionalProperties": False,
}
RESIZE = {"name": "resize", "schema": RESIZE_SCHEMA, "description": "Resize an image."}
PUBLISH = {"name": "publish", "schema": {"type": "object", "required": ["url"]}}


class Size(BaseModel):
    width: int


@pytest.fixture
async def api(redis_url: str) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(
        redis_url=redis_url,
        allow_private_endpoints=True,
        api_keys=[
            ApiKey(key=ADMIN, scopes=["admin"]),
            ApiKey(key=READER, scopes=["read"]),
            ApiKey(key=PRODUCER, scopes=["enqueue:img"]),
        ],
    )
    async with gateway_client(settings, ADMIN) as client:
        assert (await client.put("/v1/queues/img", json={})).status_code == 201
        yield client


async def register(api: httpx.AsyncClient, tasks: list[dict[str, Any]] | None, port: int) -> str:
    body: dict[str, Any] = {"url": f"http://127.0.0.1:{port}/"}
    if tasks is not None:
        body["tasks"] = tasks
    response = await api.post("/v1/queues/img/endpoints", json=body)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def catalog(api: httpx.AsyncClient, **params: Any) -> list[dict[str, Any]]:
    response = await api.get("/v1/tasks", params=params)
    assert response.status_code == 200, response.text
    return list(response.json()["items"])


def fields(response: httpx.Response) -> dict[str, str]:
    assert response.status_code == 422, response.text
    return {e["field"]: e["reason"] for e in response.json()["errors"]}


async def test_registration_with_tasks_is_listed(api: httpx.AsyncClient) -> None:
    endpoint = await register(api, [RESIZE, PUBLISH], 9001)
    await register(api, None, 9002)  # an endpoint that reports nothing adds nothing
    items = await catalog(api)
    assert [(i["queue"], i["name"]) for i in items] == [("img", "publish"), ("img", "resize")]
    resize = items[1]
    assert resize["schema"] == RESIZE_SCHEMA
    assert resize["description"] == "Resize an image."
    assert resize["endpoints"] == [
        {"id": endpoint, "url": "http://127.0.0.1:9001/", "enabled": True}
    ]
    assert resize["served"] is True
    assert resize["schemas_differ"] is False
    assert [i["name"] for i in await catalog(api, name="resize")] == ["resize"]
    assert await catalog(api, queue="img", name="nothing") == []


async def test_listing_pages_and_scopes(api: httpx.AsyncClient) -> None:
    assert (await api.put("/v1/queues/zz", json={})).status_code == 201
    await register(api, [RESIZE, PUBLISH], 9001)
    await api.post(
        "/v1/queues/zz/endpoints", json={"url": "http://127.0.0.1:9009/", "tasks": [RESIZE]}
    )
    first = (await api.get("/v1/tasks", params={"limit": 2})).json()
    assert [(i["queue"], i["name"]) for i in first["items"]] == [
        ("img", "publish"),
        ("img", "resize"),
    ]
    second = await api.get("/v1/tasks", params={"limit": 2, "cursor": first["next_cursor"]})
    assert [(i["queue"], i["name"]) for i in second.json()["items"]] == [("zz", "resize")]
    assert second.json()["next_cursor"] is None
    assert [i["queue"] for i in await catalog(api, queue="zz")] == ["zz"]
    assert (await api.get("/v1/tasks", params={"queue": "nope"})).status_code == 404
    reader = {"authorization": f"Bearer {READER}"}
    producer = {"authorization": f"Bearer {PRODUCER}"}
    assert (await api.get("/v1/tasks", headers=reader)).status_code == 200
    assert (await api.get("/v1/tasks", headers=producer)).status_code == 403
    put = await api.put("/v1/queues/img/endpoints/ep_x/tasks", json={"tasks": []}, headers=reader)
    assert put.status_code == 403


async def test_task_routes_by_id_still_work_beside_the_listing(api: httpx.AsyncClient) -> None:
    created = await api.post("/v1/queues/img/tasks", json={"name": "other"})
    task_id = created.json()["id"]
    assert (await api.get(f"/v1/tasks/{task_id}")).json()["name"] == "other"
    assert (await api.get("/v1/tasks/not-a-ulid")).status_code == 422


async def test_enqueue_is_checked_against_the_schema(api: httpx.AsyncClient) -> None:
    await register(api, [RESIZE], 9001)
    ok = await api.post(
        "/v1/queues/img/tasks", json={"name": "resize", "payload": {"kwargs": {"width": 5}}}
    )
    assert ok.status_code == 201, ok.text
    bad = await api.post(
        "/v1/queues/img/tasks",
        json={"name": "resize", "payload": {"kwargs": {"width": "wide", "color": 1}}},
    )
    assert fields(bad) == {
        "payload.kwargs.width": '"wide" is not of type "integer"',
        "payload.kwargs.color": "is not an accepted field",
    }
    missing = await api.post(
        "/v1/queues/img/tasks", json={"name": "resize", "payload": {"kwargs": {}}}
    )
    assert fields(missing) == {"payload.kwargs.width": "is required"}
    assert fields(await api.post("/v1/queues/img/tasks", json={"name": "resize"})) == {
        "payload": 'null is not of type "object"'
    }


async def test_batch_enqueue_names_the_task_and_stores_nothing(
    api: httpx.AsyncClient, redis_url: str
) -> None:
    await register(api, [RESIZE], 9001)
    good = {"name": "resize", "payload": {"kwargs": {"width": 5}}}
    bad = {"name": "resize", "payload": {"kwargs": {"width": 0}}}
    response = await api.post("/v1/queues/img/tasks/batch", json={"tasks": [good, good, bad]})
    assert list(fields(response)) == ["tasks.2.payload.kwargs.width"]
    async with Redis.from_url(redis_url, decode_responses=True) as redis:
        assert await redis.hlen(QueueKeys.of("img").meta) == 0
    assert (
        await api.post("/v1/queues/img/tasks/batch", json={"tasks": [good, good]})
    ).status_code == 201


async def test_uncataloged_names_pass_where_accepted_and_in_other_queues(
    api: httpx.AsyncClient,
) -> None:
    """A queue whose policy accepts unknown names checks only the cataloged ones; a queue whose
    endpoints reported nothing checks nothing (test_unknown_task_names has the refusals)."""
    await register(api, [RESIZE], 9001)
    assert (await api.patch("/v1/queues/img", json={"unknown_tasks": "accept"})).status_code == 200
    assert (await api.put("/v1/queues/other", json={})).status_code == 201
    for queue, body in [
        ("img", {"name": "free", "payload": [1, "anything"]}),
        ("other", {"name": "resize", "payload": "not checked in another queue"}),
    ]:
        response = await api.post(f"/v1/queues/{queue}/tasks", json=body)
        assert response.status_code == 201, response.text


async def test_reregistration_replaces_the_list_at_once(api: httpx.AsyncClient) -> None:
    endpoint = await register(api, [RESIZE], 9001)
    wide = {"name": "resize", "payload": {"kwargs": {"width": 5000}}}
    assert (await api.post("/v1/queues/img/tasks", json=wide)).status_code == 201
    narrow = {**RESIZE_SCHEMA, "properties": {**RESIZE_SCHEMA["properties"]}}
    narrow["properties"]["kwargs"] = {
        **RESIZE_SCHEMA["properties"]["kwargs"],
        "properties": {"width": {"type": "integer", "maximum": 1000}},
    }
    response = await api.put(
        f"/v1/queues/img/endpoints/{endpoint}/tasks",
        json={"tasks": [{"name": "resize", "schema": narrow}, PUBLISH]},
    )
    assert response.status_code == 200, response.text
    assert response.json()["endpoint_id"] == endpoint
    assert [t["name"] for t in response.json()["tasks"]] == ["resize", "publish"]
    assert list(fields(await api.post("/v1/queues/img/tasks", json=wide))) == [
        "payload.kwargs.width"
    ]
    assert [i["name"] for i in await catalog(api)] == ["publish", "resize"]
    # an empty list withdraws every name: nothing is checked any more
    empty = await api.put(f"/v1/queues/img/endpoints/{endpoint}/tasks", json={"tasks": []})
    assert empty.status_code == 200
    assert await catalog(api) == []
    assert (await api.post("/v1/queues/img/tasks", json=wide)).status_code == 201


async def test_reporting_for_an_unknown_endpoint_or_queue_is_404(
    api: httpx.AsyncClient, redis_url: str
) -> None:
    body = {"tasks": [RESIZE]}
    assert (await api.put("/v1/queues/img/endpoints/ep_nope/tasks", json=body)).status_code == 404
    assert (await api.put("/v1/queues/nope/endpoints/ep_x/tasks", json=body)).status_code == 404
    async with Redis.from_url(redis_url, decode_responses=True) as redis:
        assert not await redis.exists(QueueKeys.of("img").catalog)


async def test_newest_report_wins_and_deleting_an_endpoint_forgets_its_list(
    api: httpx.AsyncClient, redis_url: str
) -> None:
    old = await register(api, [RESIZE], 9001)
    loose = {"name": "resize", "schema": {"type": "object"}}
    new = await register(api, [loose], 9002)
    (entry,) = await catalog(api)
    assert entry["schema"] == {"type": "object"}
    assert entry["schemas_differ"] is True
    assert [e["id"] for e in entry["endpoints"]] == [new, old]
    anything = {"name": "resize", "payload": {"kwargs": {}}}
    assert (await api.post("/v1/queues/img/tasks", json=anything)).status_code == 201
    assert (await api.delete(f"/v1/queues/img/endpoints/{new}")).status_code == 204
    (entry,) = await catalog(api)
    assert entry["schema"] == RESIZE_SCHEMA
    assert entry["schemas_differ"] is False
    assert (await api.post("/v1/queues/img/tasks", json=anything)).status_code == 422
    assert (await api.delete(f"/v1/queues/img/endpoints/{old}")).status_code == 204
    async with Redis.from_url(redis_url, decode_responses=True) as redis:
        assert not await redis.exists(QueueKeys.of("img").catalog)
    assert (await api.delete("/v1/queues/img?force=true")).status_code == 204


async def test_deleting_the_queue_deletes_its_catalog(
    api: httpx.AsyncClient, redis_url: str
) -> None:
    await register(api, [RESIZE], 9001)
    assert (await api.delete("/v1/queues/img")).status_code == 204
    async with Redis.from_url(redis_url, decode_responses=True) as redis:
        assert await redis.keys("*catalog*") == []


@pytest.mark.parametrize(
    ("task", "field"),
    [
        ({"name": "x", "schema": {"type": "nonsense"}}, "tasks.0.schema"),
        ({"name": "x", "schema": {"$ref": "http://169.254.169.254/latest"}}, "tasks.0.schema"),
        ({"name": "x", "schema": {"minimum": "1"}}, "tasks.0.schema"),
        ({"name": "has space", "schema": {}}, "tasks.0.name"),
        ({"name": "x", "schema": {"big": "x" * 70_000}}, "tasks.0.schema"),
        ({"name": "x"}, "tasks.0.schema"),
    ],
)
async def test_unusable_schemas_are_refused(
    api: httpx.AsyncClient, redis_url: str, task: dict[str, Any], field: str
) -> None:
    response = await api.post(
        "/v1/queues/img/endpoints", json={"url": "http://127.0.0.1:9001/", "tasks": [task]}
    )
    assert field in fields(response)
    async with Redis.from_url(redis_url, decode_responses=True) as redis:
        assert not await redis.exists(QueueKeys.of("img").endpoints)


async def test_a_name_listed_twice_is_refused_with_its_own_conflict(
    api: httpx.AsyncClient, redis_url: str
) -> None:
    """The schema admits the list (unique by name is no rule JSON Schema can state), so the
    answer is not a 422 but the 409 openapi.yaml declares, of its own problem type; nothing is
    stored."""
    endpoint = await register(api, [], 9001)
    other = {**RESIZE, "description": "another"}
    cases = [
        ([RESIZE, RESIZE], "tasks.0 and tasks.1"),
        ([RESIZE, PUBLISH, other], "tasks.0 and tasks.2"),
    ]
    for tasks, where in cases:
        for response in [
            await api.put(f"/v1/queues/img/endpoints/{endpoint}/tasks", json={"tasks": tasks}),
            await api.post(
                "/v1/queues/img/endpoints", json={"url": "http://127.0.0.1:9002/", "tasks": tasks}
            ),
        ]:
            assert response.status_code == 409, response.text
            found = response.json()
            assert found["type"] == "tag:jobgate.dev,2026:problem/duplicate-task-name"
            assert found["detail"] == (
                f"task name 'resize' is listed twice: {where.replace(' and ', '.name and ')}.name"
            )
    assert await catalog(api) == []
    async with Redis.from_url(redis_url, decode_responses=True) as redis:
        assert await redis.hlen(QueueKeys.of("img").endpoints) == 1


async def test_a_disabled_endpoint_does_not_serve(api: httpx.AsyncClient, redis_url: str) -> None:
    await register(api, [RESIZE], 9001)
    async with Redis.from_url(redis_url, decode_responses=True) as redis:
        k = QueueKeys.of("img")
        (endpoint_id, raw) = next(iter((await redis.hgetall(k.endpoints)).items()))
        await redis.hset(k.endpoints, endpoint_id, raw.replace('"enabled":true', '"enabled":false'))
    (entry,) = await catalog(api)
    assert entry["served"] is False
    assert entry["endpoints"][0]["enabled"] is False
    bad = {"name": "resize", "payload": {"kwargs": {}}}
    assert (await api.post("/v1/queues/img/tasks", json=bad)).status_code == 422


async def test_service_validate_and_served_for_jobs(redis_url: str) -> None:
    from gateway.caches.catalog import Catalog
    from gateway.core.errors import ValidationFailed
    from gateway.services.catalog import CatalogService
    from gateway.store.catalog import CatalogStore
    from gateway.store.clock import ManualClock
    from gateway.store.endpoint_records import EndpointRecord
    from gateway.store.queues import QueueStore
    from gateway.store.scripts import Scripts
    from sdk.wire import EndpointTasks, QueuePolicy

    async with Redis.from_url(redis_url, decode_responses=True) as redis:
        scripts = Scripts(redis)
        await scripts.load()
        queues, store = QueueStore(redis, scripts), CatalogStore(redis, scripts)
        changed: list[str] = []
        catalog = Catalog(store)

        def forget(queue: str) -> None:
            changed.append(queue)
            catalog.forget(queue)

        service = CatalogService(catalog, store, queues, ManualClock(), on_change=forget)
        await queues.put("img", QueuePolicy(), 0)
        record = EndpointRecord(
            id="ep_1",
            queue="img",
            url="http://127.0.0.1:1/",
            concurrency=1,
            capabilities=[],
            secrets=["s"],
            created_ms=0,
        )
        await queues.add_endpoint(record)
        assert not await service.served("img", "resize")
        await service.validate("img", "resize", {"kwargs": {}})  # not cataloged: passes
        await service.put("img", "ep_1", EndpointTasks.model_validate({"tasks": [RESIZE]}))
        assert changed == ["img"]
        assert await service.served("img", "resize")
        assert not await service.served("img", "publish")
        await service.validate("img", "resize", {"kwargs": {"width": 3}})
        with pytest.raises(ValidationFailed) as failed:
            await service.validate("img", "resize", {"kwargs": {"width": -1}})
        assert [p.field for p in failed.value.errors] == ["payload.kwargs.width"]


async def test_an_sdk_workers_catalog_checks_sdk_payloads(api: httpx.AsyncClient) -> None:
    """What ``Client.add_endpoint(queue, url, tasks=worker.catalog(queue))`` sends, then
    payloads as ``@task`` producers send them, and the fields a refusal names."""
    from sdk import Worker, task
    from sdk import api as calls
    from sdk.wire import EndpointCreate

    @task("img", name="thumb")
    def thumb(path: str, size: Size, quality: int = 90) -> None:
        """Make a thumbnail."""

    worker = Worker(tasks=[thumb], secret="whsec_" + "A" * 44)
    body = EndpointCreate(url="http://127.0.0.1:9001/", tasks=worker.catalog("img"))
    call = calls.add_endpoint("img", body)
    created = await api.post(
        call.path, content=call.content(), headers={"content-type": "application/json"}
    )
    assert created.status_code == 201, created.text
    (entry,) = await catalog(api)
    assert (entry["name"], entry["description"]) == ("thumb", "Make a thumbnail.")

    async def enqueue(payload: Any) -> httpx.Response:
        return await api.post("/v1/queues/img/tasks", json={"name": "thumb", "payload": payload})

    for args, kwargs in [(("a.png", {"width": 5}), {}), ((), {"path": "a", "size": {"width": 1}})]:
        payload = thumb.create(args, kwargs).payload
        assert (await enqueue(payload)).status_code == 201, payload
    assert fields(await enqueue({"args": ["a.png"], "kwargs": {}})) == {
        "payload.kwargs.size": "is required"
    }
    assert fields(await enqueue({"args": ["a.png"]})) == {"payload.kwargs.size": "is required"}
    assert fields(await enqueue({"args": ["a", {"width": "5"}], "kwargs": {}})) == {
        "payload.args.1.width": '"5" is not of type "integer"'
    }
    assert fields(await enqueue({"args": ["a"], "kwargs": {"path": "b", "size": {}}})) == {
        "payload.kwargs.path": "is not allowed here",
        "payload.kwargs.size.width": "is required",
    }
    assert list(fields(await enqueue({"args": ["a", {"width": 1}, 1, 2], "kwargs": {}}))) == [
        "payload.args"
    ]
