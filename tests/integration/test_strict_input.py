"""The gateway takes exactly what openapi.yaml describes: nothing coerced, no NaN, and bad input
of any kind is a 4xx problem, never a 500 and never stored."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from gateway.settings import ApiKey, Settings
from tests.integration.test_api import ADMIN, problem, snapshot
from tests.support import gateway_client

TASK = "01ARZ3NDEKTSV4RRFFQ69G5FAV"
CALLBACK = f"/v1/callbacks/q/{TASK}"
LEASE = {"jobgate-lease": "0123456789abcdef0123456789abcdef"}


@pytest.fixture
async def api(redis_url: str) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(redis_url=redis_url, api_keys=[ApiKey(key=ADMIN, scopes=["admin"])])
    async with gateway_client(settings, ADMIN) as client:
        assert (await client.put("/v1/queues/q", json={})).status_code == 201
        yield client


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/v1/queues/q/tasks", b'{"name": "x", "payload": NaN}'),
        ("POST", "/v1/queues/q/tasks", b'{"name": "x", "payload": {"a": [Infinity]}}'),
        ("POST", "/v1/queues/q/tasks", b'{"name": "x", "payload": -Infinity}'),
        ("POST", "/v1/queues/q/tasks/batch", b'{"tasks": [{"name": "x", "payload": NaN}]}'),
        ("POST", f"{CALLBACK}/result", b'{"result": NaN}'),
        ("POST", f"{CALLBACK}/checkpoint", b'{"state": {"done": Infinity}}'),
        ("POST", f"{CALLBACK}/heartbeat", b'{"progress": NaN}'),
        ("PUT", "/v1/queues/q", b'{"lease_timeout": Infinity}'),
    ],
)
async def test_nan_and_infinity_are_not_json(
    api: httpx.AsyncClient, redis_url: str, method: str, path: str, body: bytes
) -> None:
    before = await snapshot(redis_url)
    found = problem(await api.request(method, path, content=body, headers=LEASE), 400)
    assert "not valid JSON" in found["detail"]
    assert await snapshot(redis_url) == before


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/queues/q/tasks", b'{"name": "x", "payload": [1e400]}', "payload"),
        (f"{CALLBACK}/result", b'{"result": {"big": -1e999}}', "result"),
        (f"{CALLBACK}/checkpoint", b'{"state": 1e400}', "state"),
    ],
)
async def test_numbers_too_large_for_a_double_are_refused(
    api: httpx.AsyncClient, redis_url: str, path: str, body: bytes, field: str
) -> None:
    before = await snapshot(redis_url)
    found = problem(await api.post(path, content=body, headers=LEASE), 422)
    assert [e["field"] for e in found["errors"]] == [field]
    assert await snapshot(redis_url) == before


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("POST", "/v1/queues/q/tasks", {"name": "x", "priority": True}, "priority"),
        ("POST", "/v1/queues/q/tasks", {"name": "x", "delay": "5"}, "delay"),
        ("POST", "/v1/queues/q/tasks", {"name": "x", "max_attempts": "3"}, "max_attempts"),
        ("POST", "/v1/queues/q/tasks", {"name": "x", "run_at": -1}, "run_at"),
        ("POST", "/v1/queues/q/tasks", {"name": "x", "lease_timeout": "30"}, "lease_timeout"),
        ("PUT", "/v1/queues/q", {"paused": 0}, "paused"),
        ("PUT", "/v1/queues/q", {"max_concurrency": True}, "max_concurrency"),
        ("PUT", "/v1/queues/q", {"retention_succeeded": True}, "retention_succeeded"),
        ("PUT", "/v1/queues/q", {"backoff": {"strategy": 1}}, "backoff.strategy"),
        ("PATCH", "/v1/queues/q", {"dead_letter": "false"}, "dead_letter"),
        ("PATCH", "/v1/queues/q", {"max_attempts": 2.5}, "max_attempts"),
        ("POST", "/v1/queues/q/endpoints", {"url": "http://a.test/", "concurrency": "3"}, None),
        ("POST", f"{CALLBACK}/heartbeat", {"progress": True}, "progress"),
        ("POST", f"{CALLBACK}/heartbeat", {"extend": "10"}, "extend"),
        ("POST", f"{CALLBACK}/error", {"error": "x", "retryable": 0}, "retryable"),
        ("POST", f"{CALLBACK}/error", {"error": 5}, "error"),
        ("POST", f"{CALLBACK}/error", {"error": "x", "retry_delay": "1"}, "retry_delay"),
        ("POST", f"{CALLBACK}/logs", {"lines": [{"message": "m", "at": 0}]}, "lines.0.at"),
        ("POST", "/v1/deadletters/resubmit", {"ids": [TASK], "reset_attempts": 1}, None),
        ("POST", "/v1/queues/q/clean", {"older_than": "60"}, "older_than"),
    ],
)
async def test_nothing_is_coerced_to_the_type_the_schema_says(
    api: httpx.AsyncClient,
    redis_url: str,
    method: str,
    path: str,
    body: object,
    field: str | None,
) -> None:
    before = await snapshot(redis_url)
    found = problem(await api.request(method, path, json=body, headers=LEASE), 422)
    if field is not None:
        assert field in [e["field"] for e in found["errors"]]
    assert await snapshot(redis_url) == before


@pytest.mark.parametrize(
    ("path", "params", "field"),
    [
        ("/v1/queues/q/tasks", {"limit": "abc"}, "limit"),
        ("/v1/queues/q/tasks", {"limit": "2.5"}, "limit"),
        ("/v1/queues/q/tasks", {"limit": " 5"}, "limit"),
        ("/v1/queues/q/tasks", {"state": ""}, "state"),
        ("/v1/queues/q/tasks", {"owner": ""}, "owner"),
        ("/v1/queues/q/tasks", {"name": "has space"}, "name"),
        ("/v1/queues/q/tasks", {"cursor": ""}, "cursor"),
        ("/v1/queues/q/scheduled", {"limit": "1_0"}, "limit"),
        ("/v1/queues/q/scheduled", {"cursor": "W10"}, "cursor"),
        ("/v1/deadletters", {"since": "0"}, "since"),
        ("/v1/deadletters", {"until": "2030-01-01T00:00:00"}, "until"),
        ("/v1/deadletters", {"queue": "bad name"}, "queue"),
        ("/v1/deadletters", {"cursor": "q:1:not-a-ulid"}, "cursor"),
        ("/v1/running", {"limit": "0"}, "limit"),
        ("/v1/running", {"owner": ""}, "owner"),
        (f"/v1/tasks/{TASK}", {"wait": "5_0"}, "wait"),
        (f"/v1/tasks/{TASK}", {"wait": "Infinity"}, "wait"),
        (f"/v1/tasks/{TASK}", {"wait": "nan"}, "wait"),
    ],
)
async def test_query_parameters_are_checked_as_declared(
    api: httpx.AsyncClient, path: str, params: dict[str, str], field: str
) -> None:
    later = {"name": "x", "id": TASK, "delay": 3600}  # not dispatched
    assert (await api.post("/v1/queues/q/tasks", json=later)).is_success
    found = problem(await api.get(path, params=params), 422)
    assert [e["field"] for e in found["errors"]] == [field]


async def test_boolean_query_parameters_are_true_or_false(api: httpx.AsyncClient) -> None:
    for value in ("1", "0", "yes", "True", ""):
        found = problem(await api.delete("/v1/queues/q", params={"force": value}), 422)
        assert [e["field"] for e in found["errors"]] == ["force"]
    assert (await api.delete("/v1/queues/q", params={"force": "false"})).status_code == 204


async def test_what_the_schema_allows_is_taken(api: httpx.AsyncClient) -> None:
    """Ints where the schema says number, 3.0 where it says integer (JSON Schema counts it as
    one), lower-case ULIDs and 't'/'z' in date-times."""
    created = await api.post(
        "/v1/queues/q/tasks",
        json={"name": "x", "id": TASK.lower(), "run_at": "2030-01-01t00:00:00z", "payload": 1e308},
    )
    assert created.status_code == 201, created.text
    assert created.json()["id"] == TASK
    assert created.json()["payload"] == 1e308
    policy = {"lease_timeout": 30, "retention_succeeded": 0, "max_attempts": 3.0}
    replaced = await api.put("/v1/queues/q", json=policy)
    assert replaced.status_code == 200, replaced.text
    assert replaced.json()["policy"]["max_attempts"] == 3
    for limit in ("10", "10.0", "1e1"):
        assert (await api.get("/v1/queues/q/tasks", params={"limit": limit})).status_code == 200
