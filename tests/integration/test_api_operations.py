"""The operator routes in-process against a real Redis, with a real worker over loopback that
fails tasks named 'fail' (400) and accepts tasks named 'hold' (202, never calling back)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway.settings import ApiKey, Settings
from tests.support import gateway_client, serve, until

ADMIN = "admin-key-0123456789"
READER = "reader-key-0123456789"
PRODUCER = "producer-key-0123456789"
TRACEBACK = 'Traceback (most recent call last):\n  File "worker.py"\nValueError: bad input'


async def _push(request: Request) -> Response:
    task = json.loads(await request.body())
    if task["name"] == "fail":
        return JSONResponse({"error": "bad input", "traceback": TRACEBACK}, status_code=400)
    if task["name"] == "hold":
        return Response(status_code=202)
    return JSONResponse({"ok": True})


@pytest.fixture
async def worker() -> AsyncIterator[str]:
    async with serve(Starlette(routes=[Route("/", _push, methods=["POST"])])) as url:
        yield url + "/"


@pytest.fixture
async def api(redis_url: str) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(
        redis_url=redis_url,
        allow_private_endpoints=True,
        api_keys=[
            ApiKey(key=ADMIN, scopes=["admin"]),
            ApiKey(key=READER, scopes=["read"]),
            ApiKey(key=PRODUCER, scopes=["enqueue:*"]),
        ],
    )
    async with gateway_client(settings, ADMIN) as client:
        assert (await client.put("/v1/queues/jobs", json={"max_attempts": 1})).status_code
        yield client


def problem(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    return dict(response.json())


def fields(response: httpx.Response) -> list[str]:
    return [e["field"] for e in problem(response, 422)["errors"]]


async def enqueue(api: httpx.AsyncClient, tasks: list[dict[str, Any]]) -> list[str]:
    r = await api.post("/v1/queues/jobs/tasks/batch", json={"tasks": tasks})
    assert r.status_code == 201, r.text
    return [t["id"] for t in r.json()["tasks"]]


async def counts(api: httpx.AsyncClient) -> dict[str, int]:
    return dict((await api.get("/v1/queues/jobs")).json()["counts"])


async def test_bad_parameters_are_named(api: httpx.AsyncClient) -> None:
    for params, field in [
        ({"since": "yesterday"}, "since"),
        ({"since": "2030-01-01T00:00:00"}, "since"),
        ({"until": "2030-13-01T00:00:00Z"}, "until"),
        ({"limit": "0"}, "limit"),
        ({"limit": "1001"}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"queue": "bad{name}"}, "queue"),
        ({"name": "has space"}, "name"),
        ({"owner": "x" * 200}, "owner"),
        ({"cursor": "zzz"}, "cursor"),
    ]:
        assert fields(await api.get("/v1/deadletters", params=params)) == [field], params
    problem(await api.get("/v1/deadletters", params={"queue": "nowhere"}), 404)
    ok = await api.get("/v1/deadletters", params={"since": "2020-01-01T00:00:00+02:00"})
    assert ok.json() == {"items": [], "next_cursor": None}

    assert fields(await api.get("/v1/running", params={"limit": "5001"})) == ["limit"]
    assert fields(await api.get("/v1/running", params={"queue": "bad{name}"})) == ["queue"]
    problem(await api.get("/v1/running", params={"queue": "nowhere"}), 404)
    assert fields(await api.get("/v1/queues/jobs/scheduled", params={"limit": "501"})) == ["limit"]
    problem(await api.get("/v1/queues/nowhere/scheduled"), 404)

    resubmit = "/v1/deadletters/resubmit"
    assert fields(await api.post(resubmit, json={})) == ["body"]
    both = {"ids": ["01ARZ3NDEKTSV4RRFFQ69G5FAV"], "filter": {}}
    assert fields(await api.post(resubmit, json=both)) == ["body"]
    assert fields(await api.post(resubmit, json={"ids": ["nope"]})) == ["ids.0"]
    assert fields(await api.post(resubmit, json={"filter": {}, "limit": 1001})) == ["limit"]
    naive = {"filter": {"since": "2030-01-01T00:00:00"}}
    assert fields(await api.post(resubmit, json=naive)) == ["filter.since"]
    problem(await api.post(resubmit, json={"filter": {"queue": "nowhere"}}), 404)

    clean = "/v1/queues/jobs/clean"
    # The wire checks states in a model validator, so the problem names the body, and the
    # reason names the field.
    (error,) = problem(await api.post(clean, json={"states": ["queued"]}), 422)["errors"]
    assert "states must be finished states" in error["reason"]
    assert fields(await api.post(clean, json={"older_than": -1})) == ["older_than"]
    problem(await api.post("/v1/queues/nowhere/clean", json={}), 404)


async def test_scopes(api: httpx.AsyncClient) -> None:
    reader = {"authorization": f"Bearer {READER}"}
    producer = {"authorization": f"Bearer {PRODUCER}"}
    for path in ("/v1/deadletters", "/v1/running", "/v1/queues/jobs/scheduled"):
        assert (await api.get(path, headers=reader)).status_code == 200, path
    problem(await api.get("/v1/deadletters", headers=producer), 403)
    problem(await api.get("/v1/running", headers=producer), 403)
    body = {"filter": {}}
    problem(await api.post("/v1/deadletters/resubmit", json=body, headers=reader), 403)
    problem(await api.post("/v1/queues/jobs/clean", json={}, headers=reader), 403)
    problem(await api.post("/v1/queues/jobs/clean", json={}, headers=producer), 403)


async def test_dead_letters_are_found_resubmitted_and_dispatched_at_once_then_cleaned(
    api: httpx.AsyncClient, worker: str
) -> None:
    assert (await api.post("/v1/queues/jobs/endpoints", json={"url": worker})).status_code == 201
    acme = await enqueue(api, [{"name": "fail", "owner": "acme", "version": "v1"}] * 5)
    other = await enqueue(api, [{"name": "fail", "owner": "globex"}] * 2)
    await until(lambda: _dead(api, 7), what="seven dead tasks")

    found: list[dict[str, Any]] = []
    cursor = None
    while True:
        params = {"queue": "jobs", "owner": "acme", "limit": "2"} | (
            {"cursor": cursor} if cursor else {}
        )
        page = (await api.get("/v1/deadletters", params=params)).json()
        found += page["items"]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert sorted(t["id"] for t in found) == sorted(acme)
    (attempt,) = found[0]["attempts"]
    assert (attempt["outcome"], attempt["http_status"]) == ("failed", 400)
    assert (attempt["error"], attempt["traceback"]) == ("bad input", TRACEBACK)
    assert found[0]["version"] == "v1"

    r = await api.post("/v1/deadletters/resubmit", json={"filter": {"owner": "acme"}})
    assert r.status_code == 200, r.text
    assert sorted(r.json()["resubmitted"]) == sorted(acme)
    assert r.json()["skipped"] == []

    # Pushed again at once (the dispatcher's idle tick is 5 s), and dead again, with the
    # first attempt kept.
    async def pushed_again() -> bool:
        for task_id in acme:
            task = (await api.get(f"/v1/tasks/{task_id}")).json()
            if task["state"] != "dead" or len(task["attempts"]) != 2:
                return False
        return True

    await until(pushed_again, timeout=4, what="the resubmitted tasks to run again")

    r = await api.post("/v1/deadletters/resubmit", json={"ids": [other[0], other[0]]})
    assert r.json()["resubmitted"] == [other[0]]
    await until(lambda: _dead(api, 7), what="seven dead tasks again")

    r = await api.post("/v1/queues/jobs/clean", json={"states": ["dead"], "name": "fail"})
    assert r.json() == {"deleted": 7}
    assert (await api.get("/v1/deadletters")).json()["items"] == []
    problem(await api.get(f"/v1/tasks/{acme[0]}"), 404)


async def _dead(api: httpx.AsyncClient, n: int) -> bool:
    return (await counts(api)).get("dead") == n


async def test_running_and_scheduled_tasks(api: httpx.AsyncClient, worker: str) -> None:
    assert (await api.post("/v1/queues/jobs/endpoints", json={"url": worker})).status_code == 201
    (held,) = await enqueue(api, [{"name": "hold", "owner": "acme"}])
    (later,) = await enqueue(api, [{"name": "x", "delay": 3600, "priority": 7}])

    async def running() -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = (await api.get("/v1/running")).json()["items"]
        return items

    (task,) = await until(running, what="the held task to run")
    assert (task["id"], task["queue"], task["name"], task["owner"]) == (
        held,
        "jobs",
        "hold",
        "acme",
    )
    assert task["endpoint_url"] == worker
    assert task["endpoint_id"].startswith("ep_")
    assert task["attempt"] == 1
    assert task["elapsed"] >= 0
    assert task["stalled"] is False
    assert task["lease_expires_at"] is not None
    r = await api.get("/v1/running", params={"queue": "jobs", "owner": "nobody"})
    assert r.json() == {"items": [], "truncated": False}

    page = (await api.get("/v1/queues/jobs/scheduled")).json()
    assert [(t["id"], t["kind"], t["priority"]) for t in page["items"]] == [(later, "delayed", 7)]
    assert page["next_cursor"] is None
