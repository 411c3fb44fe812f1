"""What a new user sees first: the warning of a gateway without keys, the access log, and
results in task listings."""

from __future__ import annotations

import logging
import re

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway.settings import ApiKey, Settings
from sdk.wire import PushBody
from tests.support import gateway_client, serve

ADMIN = "admin-key-0123456789"
LEASE = "lease-token-never-logged"
LINE = re.compile(r"^(GET|POST|PUT) (\S+) (\d{3}) (\d+\.\d)ms id=([0-9a-f]{16}|[\w.:-]+)$")


async def test_a_gateway_without_api_keys_says_so_at_start(
    redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="gateway.app")
    async with gateway_client(Settings(redis_url=redis_url), "") as api:
        assert (await api.get("/v1/queues")).status_code == 401
    (warning,) = [r for r in caplog.records if r.name == "gateway.app"]
    assert warning.levelno == logging.WARNING
    assert "JOBGATE_API_KEYS" in warning.getMessage()
    assert "401" in warning.getMessage()


async def test_a_gateway_with_api_keys_does_not_warn(
    redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="gateway.app")
    settings = Settings(redis_url=redis_url, api_keys=[ApiKey(key=ADMIN, scopes=["admin"])])
    async with gateway_client(settings, ADMIN) as api:
        assert (await api.get("/v1/queues")).status_code == 200
    assert [r for r in caplog.records if r.name == "gateway.app"] == []


async def test_the_access_log_has_a_line_per_request_without_secrets(
    redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="gateway.access")
    settings = Settings(
        redis_url=redis_url, api_keys=[ApiKey(key=ADMIN, scopes=["admin"])], access_log=True
    )
    async with gateway_client(settings, ADMIN) as api:
        put = await api.put("/v1/queues/mail", json={})
        listed = await api.get("/v1/queues/mail/tasks", params={"state": "queued", "limit": 5})
        callback = await api.post(
            "/v1/callbacks/mail/01J0000000000000000000000A/heartbeat",
            json={},
            headers={"jobgate-lease": LEASE, "x-request-id": "client-id.42"},
        )
        refused = await api.get("/v1/queues", headers={"authorization": "Bearer wrong-key-123456"})
    assert (put.status_code, listed.status_code) == (201, 200)
    assert (callback.status_code, refused.status_code) == (404, 401)
    lines = [r.getMessage() for r in caplog.records if r.name == "gateway.access"]
    parsed = [LINE.match(line) for line in lines]
    assert all(parsed), lines
    assert [m.group(1, 2, 3) for m in parsed if m] == [
        ("PUT", "/v1/queues/mail", "201"),
        ("GET", "/v1/queues/mail/tasks", "200"),
        ("POST", "/v1/callbacks/mail/01J0000000000000000000000A/heartbeat", "404"),
        ("GET", "/v1/queues", "401"),
    ]
    ids = [m.group(5) for m in parsed if m]
    assert ids[2] == "client-id.42"  # the client's id is kept
    assert len(set(ids)) == 4
    responses = (put, listed, callback, refused)
    assert [r.headers["x-request-id"] for r in responses] == ids
    for secret in (ADMIN, LEASE, "wrong-key", "limit=5"):
        assert not any(secret in line for line in lines)


async def test_the_access_log_can_be_turned_off(
    redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="gateway.access")
    settings = Settings(redis_url=redis_url, api_keys=[ApiKey(key=ADMIN, scopes=["admin"])])
    assert settings.access_log is False  # the default of jobgate serve
    async with gateway_client(settings, ADMIN) as api:
        response = await api.get("/v1/queues")
    assert response.status_code == 200
    assert "x-request-id" not in response.headers
    assert [r for r in caplog.records if r.name == "gateway.access"] == []


async def echo(request: Request) -> Response:
    """A worker that answers every push at once with its payload as the result."""
    push = PushBody.model_validate_json(await request.body())
    return JSONResponse({"echo": push.payload})


async def test_listed_succeeded_tasks_carry_their_results(redis_url: str) -> None:
    settings = Settings(
        redis_url=redis_url,
        api_keys=[ApiKey(key=ADMIN, scopes=["admin"])],
        allow_private_endpoints=True,
    )
    worker = Starlette(routes=[Route("/", echo, methods=["POST"])])
    async with serve(worker) as worker_url, gateway_client(settings, ADMIN) as api:
        (await api.put("/v1/queues/q", json={})).raise_for_status()
        (await api.put("/v1/queues/idle", json={})).raise_for_status()
        r = await api.post("/v1/queues/q/endpoints", json={"url": worker_url + "/"})
        assert r.status_code == 201, r.text
        ids = []
        for n in range(3):
            r = await api.post("/v1/queues/q/tasks", json={"name": "job", "payload": {"n": n}})
            assert r.status_code == 201, r.text
            ids.append(r.json()["id"])
        for task_id in ids:
            r = await api.get(f"/v1/tasks/{task_id}", params={"wait": 10}, timeout=15)
            assert r.json()["state"] == "succeeded", r.text
        r = await api.post("/v1/queues/idle/tasks", json={"name": "job", "payload": 1})
        assert r.status_code == 201, r.text

        page = (await api.get("/v1/queues/q/tasks", params={"state": "succeeded"})).json()
        queued = (await api.get("/v1/queues/idle/tasks", params={"state": "queued"})).json()
    results = {item["id"]: item["result"] for item in page["items"]}
    assert results == {task_id: {"echo": {"n": n}} for n, task_id in enumerate(ids)}
    assert [item["result"] for item in queued["items"]] == [None]
