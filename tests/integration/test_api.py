"""The HTTP API in-process against a real Redis: bad input, auth, and what is (not) stored."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis
from redis.exceptions import OutOfMemoryError

from gateway.serving.redis_server import ManagedRedis
from gateway.settings import ApiKey, Settings
from tests.support import free_port, gateway_client

ADMIN = "admin-key-0123456789"
READER = "reader-key-0123456789"
PRODUCER = "producer-key-0123456789"


@pytest.fixture
async def api(redis_url: str) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(
        redis_url=redis_url,
        max_body_bytes=4096,
        api_keys=[
            ApiKey(key=ADMIN, scopes=["admin"]),
            ApiKey(key=READER, scopes=["read"]),
            ApiKey(key=PRODUCER, scopes=["enqueue:mail-*"]),
        ],
    )
    async with gateway_client(settings, ADMIN) as client:
        assert (await client.put("/v1/queues/mail-out", json={})).status_code == 201
        yield client


async def snapshot(redis_url: str) -> dict[str, Any]:
    """Every key and its type and size: enough to see that nothing changed."""
    async with Redis.from_url(redis_url, decode_responses=True) as redis:
        found = {}
        for key in await redis.keys("*"):
            kind = await redis.type(key)
            size = {
                "hash": redis.hgetall,
                "zset": lambda k: redis.zrange(k, 0, -1, withscores=True),
                "set": redis.smembers,
                "string": redis.get,
                "list": lambda k: redis.lrange(k, 0, -1),
            }[kind](key)
            found[key] = await size
        return found


def problem(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body = dict(response.json())
    assert body["status"] == status
    assert body["title"]
    return body


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": 5}, "name"),
        ({"name": "ok", "priority": "high"}, "priority"),
        ({"name": "ok", "priority": 5000}, "priority"),
        ({"name": "has space"}, "name"),
        ({"name": "ok", "delay": -1}, "delay"),
        ({"name": "ok", "id": "not-a-ulid"}, "id"),
        ({"name": "ok", "surprise": 1}, "surprise"),
        ({"name": "ok", "run_at": "2030-01-01T00:00:00"}, "run_at"),
        ({}, "name"),
        # strict: nothing is coerced to the type the schema says
        ({"name": "ok", "priority": True}, "priority"),
        ({"name": "ok", "priority": 1.5}, "priority"),
        ({"name": "ok", "delay": "5"}, "delay"),
        ({"name": "ok", "max_attempts": "3"}, "max_attempts"),
        ({"name": "ok", "run_at": -1}, "run_at"),
        ({"name": "ok", "run_at": "0"}, "run_at"),
        ({"name": "ok", "run_at": "2030-01-01"}, "run_at"),
        ({"name": "ok", "id": "01ARZ3NDEKTSV4RRFFQ69G5FAV\n"}, "id"),
        ({"name": "ok\n"}, "name"),
        ({"name": "ok", "depends_on": "01ARZ3NDEKTSV4RRFFQ69G5FAV"}, "depends_on"),
    ],
)
async def test_bad_fields_are_named_and_nothing_is_stored(
    api: httpx.AsyncClient, redis_url: str, body: dict[str, Any], field: str
) -> None:
    before = await snapshot(redis_url)
    found = problem(await api.post("/v1/queues/mail-out/tasks", json=body), 422)
    assert field in [e["field"] for e in found["errors"]]
    assert await snapshot(redis_url) == before


async def test_malformed_json_oversize_and_wrong_media_type(
    api: httpx.AsyncClient, redis_url: str
) -> None:
    before = await snapshot(redis_url)
    assert (
        "JSON"
        in problem(await api.post("/v1/queues/mail-out/tasks", content=b'{"name": '), 400)["detail"]
    )
    big = {"name": "ok", "payload": "x" * 5000}
    assert "limit" in problem(await api.post("/v1/queues/mail-out/tasks", json=big), 413)["detail"]
    problem(
        await api.post(
            "/v1/queues/mail-out/tasks", content=b"name=x", headers={"content-type": "text/plain"}
        ),
        415,
    )
    problem(await api.post("/v1/queues/mail-out/tasks", content=b""), 400)
    problem(await api.post("/v1/queues/mail-out/tasks/batch", json={"tasks": []}), 422)
    assert await snapshot(redis_url) == before


async def test_unknown_queue_and_bad_queue_names(api: httpx.AsyncClient, redis_url: str) -> None:
    before = await snapshot(redis_url)
    found = problem(await api.post("/v1/queues/nowhere/tasks", json={"name": "x"}), 404)
    assert "PUT /v1/queues/nowhere" in found["detail"]
    problem(await api.put("/v1/queues/bad{name}", json={}), 422)
    problem(await api.get("/v1/tasks/not-a-ulid"), 422)
    problem(await api.get("/v1/tasks/01ARZ3NDEKTSV4RRFFQ69G5FAV"), 404)
    problem(await api.get("/v1/nothing-here"), 404)
    problem(await api.delete("/v1/queues"), 405)
    problem(await api.get("/v1/queues/mail-out/tasks", params={"state": "lost"}), 422)
    problem(await api.get("/v1/queues/mail-out/tasks", params={"cursor": "abc"}), 422)
    assert await snapshot(redis_url) == before
    task = (await api.post("/v1/queues/mail-out/tasks", json={"name": "x"})).json()
    for wait in ("x", "-1", "61", "nan"):
        problem(await api.get(f"/v1/tasks/{task['id']}", params={"wait": wait}), 422)


async def test_batch_is_all_or_nothing(api: httpx.AsyncClient, redis_url: str) -> None:
    ok = await api.post(
        "/v1/queues/mail-out/tasks", json={"name": "x", "id": "01ARZ3NDEKTSV4RRFFQ69G5FAV"}
    )
    assert ok.status_code == 201
    before = await snapshot(redis_url)
    batch = {"tasks": [{"name": "a"}, {"name": "b", "id": "01ARZ3NDEKTSV4RRFFQ69G5FAV"}]}
    problem(await api.post("/v1/queues/mail-out/tasks/batch", json=batch), 409)
    repeated = {"tasks": [{"name": "a", "id": "01BX5ZZKBKACTAV9WEVGEMMVRZ"}] * 2}
    # The schema admits it (uniqueItems cannot compare ids alone): a 409 of its own type.
    found = problem(await api.post("/v1/queues/mail-out/tasks/batch", json=repeated), 409)
    assert found["type"] == "tag:jobgate.dev,2026:problem/duplicate-task-id"
    assert found["detail"].startswith("tasks.1.id repeats tasks.0.id")
    assert await snapshot(redis_url) == before
    good = await api.post("/v1/queues/mail-out/tasks/batch", json={"tasks": [{"name": "a"}] * 3})
    assert good.status_code == 201
    assert [t["state"] for t in good.json()["tasks"]] == ["queued"] * 3


async def test_prefer_return_minimal_answers_id_state_and_deduplicated(
    api: httpx.AsyncClient,
) -> None:
    minimal = {"prefer": "return=minimal"}
    one = await api.post(
        "/v1/queues/mail-out/tasks", json={"name": "x", "dedup_key": "k"}, headers=minimal
    )
    assert one.status_code == 201
    assert one.headers["preference-applied"] == "return=minimal"
    task_id = one.json()["id"]
    assert one.json() == {"id": task_id, "state": "queued", "deduplicated": False, "flow": None}
    again = await api.post(
        "/v1/queues/mail-out/tasks", json={"name": "x", "dedup_key": "k"}, headers=minimal
    )
    assert (again.status_code, again.json()) == (
        200,
        {"id": task_id, "state": "queued", "deduplicated": True, "flow": None},
    )
    batch = {"tasks": [{"name": "a", "delay": 60}, {"name": "b", "dedup_key": "k"}]}
    many = await api.post("/v1/queues/mail-out/tasks/batch", json=batch, headers=minimal)
    assert many.status_code == 201
    assert many.headers["preference-applied"] == "return=minimal"
    first, second = many.json()["tasks"]
    assert first == {"id": first["id"], "state": "scheduled", "deduplicated": False, "flow": None}
    assert second == {"id": task_id, "state": "queued", "deduplicated": True, "flow": None}
    full = (await api.get(f"/v1/tasks/{first['id']}")).json()
    assert (full["name"], full["state"]) == ("a", "scheduled")
    # Without it, or with another preference, or with wait: the whole Task, nothing applied.
    for headers, params in [
        ({}, {}),
        ({"prefer": "return=representation"}, {}),
        (minimal, {"wait": "0.01"}),
    ]:
        whole = await api.post(
            "/v1/queues/mail-out/tasks", json={"name": "x"}, headers=headers, params=params
        )
        assert "preference-applied" not in whole.headers
        assert whole.json()["name"] == "x"
    whole = await api.post("/v1/queues/mail-out/tasks/batch", json=batch)
    assert "preference-applied" not in whole.headers
    assert [t["name"] for t in whole.json()["tasks"]] == ["a", "x"]
    # A refusal is the same problem either way.
    problem(await api.post("/v1/queues/mail-out/tasks", json={}, headers=minimal), 422)


async def test_scopes(api: httpx.AsyncClient) -> None:
    assert (await api.put("/v1/queues/other", json={})).status_code == 201
    problem(await api.get("/v1/queues", headers={"authorization": ""}), 401)
    problem(
        await api.get("/v1/queues", headers={"authorization": "Bearer wrong-key-0123456789"}), 401
    )
    reader = {"authorization": f"Bearer {READER}"}
    assert (await api.get("/v1/queues", headers=reader)).status_code == 200
    problem(await api.put("/v1/queues/x", json={}, headers=reader), 403)
    problem(await api.post("/v1/queues/mail-out/tasks", json={"name": "x"}, headers=reader), 403)
    producer = {"authorization": f"Bearer {PRODUCER}"}
    created = await api.post("/v1/queues/mail-out/tasks", json={"name": "x"}, headers=producer)
    assert created.status_code == 201
    task_id = created.json()["id"]
    assert (await api.get(f"/v1/tasks/{task_id}", headers=producer)).status_code == 200
    problem(await api.post("/v1/queues/other/tasks", json={"name": "x"}, headers=producer), 403)
    problem(await api.get("/v1/queues", headers=producer), 403)
    other = await api.post("/v1/queues/other/tasks", json={"name": "x"})
    problem(await api.get(f"/v1/tasks/{other.json()['id']}", headers=producer), 403)


async def test_queue_lifecycle(api: httpx.AsyncClient, redis_url: str) -> None:
    r = await api.put(
        "/v1/queues/work", json={"max_attempts": 3, "backoff": {"strategy": "linear"}}
    )
    assert r.status_code == 201
    assert (await api.put("/v1/queues/work", json={"max_attempts": 4})).status_code == 200
    patched = await api.patch("/v1/queues/work", json={"paused": True})
    assert patched.json()["policy"] | {"paused": True} == patched.json()["policy"]
    assert patched.json()["policy"]["max_attempts"] == 4
    problem(await api.patch("/v1/queues/work", json={"max_attempts": 0}), 422)
    capped = {"backoff": {"base_delay": 10, "max_delay": 1}}  # the cap wins: every delay 1 s
    taken = await api.patch("/v1/queues/work", json=capped)
    assert taken.json()["policy"]["backoff"]["max_delay"] == 1, taken.text
    problem(await api.patch("/v1/queues/work", json={"backoff": {"max_delay": -1}}), 422)
    task = (await api.post("/v1/queues/work/tasks", json={"name": "x"})).json()
    problem(await api.delete("/v1/queues/work"), 409)
    cancelled = await api.post(f"/v1/tasks/{task['id']}/cancel")
    assert cancelled.json()["state"] == "cancelled"
    problem(await api.post(f"/v1/tasks/{task['id']}/cancel"), 409)
    assert (await api.delete("/v1/queues/work")).status_code == 204
    problem(await api.get("/v1/queues/work"), 404)
    assert not [k for k in (await snapshot(redis_url)) if "{work}" in k or task["id"] in k]


async def test_scheduled_task_listing_and_wait(api: httpx.AsyncClient) -> None:
    later = await api.post(
        "/v1/queues/mail-out/tasks", json={"name": "x", "delay": 3600, "priority": 3}
    )
    assert later.json()["state"] == "scheduled"
    page = (await api.get("/v1/queues/mail-out/tasks", params={"state": "scheduled"})).json()
    assert [t["id"] for t in page["items"]] == [later.json()["id"]]
    # A wait on an unfinished task returns the task, unfinished, when the wait runs out.
    waited = await api.get(f"/v1/tasks/{later.json()['id']}", params={"wait": 0.2})
    assert waited.json()["state"] == "scheduled"


async def test_endpoint_urls_are_checked(api: httpx.AsyncClient) -> None:
    for url, status in [
        ("ftp://example.com/", 422),
        ("http://169.254.169.254/latest/meta-data", 422),
        ("http://127.0.0.1:8000/", 422),
        ("http://100.100.100.200/latest/meta-data", 422),
        ("http://[2002:7f00:1::]:8000/", 422),
        ("http://[64:ff9b::a9fe:a9fe]/", 422),
        ("http://user:pw@example.com/", 422),
    ]:
        problem(await api.post("/v1/queues/mail-out/endpoints", json={"url": url}), status)


async def test_a_redis_that_stops_answering_is_answered_503_within_redis_timeout(
    tmp_path: Path,
) -> None:
    """A Redis that keeps its connections open but answers nothing (SIGSTOP: as a network
    partition or a lost host looks) fails the request after ``redis_timeout``, as 503 with
    Retry-After, instead of holding it for good (redis-py before 8.0 set no read timeout)."""
    with ManagedRedis(tmp_path, port=free_port(), appendonly=False) as server:
        settings = Settings(
            redis_url=server.url,
            api_keys=[ApiKey(key=ADMIN, scopes=["admin"])],
            redis_timeout=0.5,
        )
        process = server.process
        assert process is not None
        async with gateway_client(settings, ADMIN) as api:
            assert (await api.put("/v1/queues/mail", json={})).status_code == 201
            os.kill(process.pid, signal.SIGSTOP)
            try:
                started = time.monotonic()
                # The client's own deadline only turns a hang into this test's failure.
                r = await asyncio.wait_for(
                    api.post("/v1/queues/mail/tasks", json={"name": "x"}), 30
                )
                waited = time.monotonic() - started
            finally:
                os.kill(process.pid, signal.SIGCONT)
            found = problem(r, 503)
            assert "cannot reach its Redis" in found["detail"]
            assert int(r.headers["retry-after"]) > 0
            # One command's timeout, perhaps two (the answer may be read back), plus slack for
            # a loaded machine; the point is that it ends.
            assert waited < 15, waited
            assert (await api.post("/v1/queues/mail/tasks", json={"name": "x"})).status_code == 201


async def test_out_of_memory_answers_503_and_stores_nothing(
    api: httpx.AsyncClient, redis_url: str
) -> None:
    async with Redis.from_url(redis_url) as redis:
        used = int((await redis.info("memory"))["used_memory"])
        await redis.config_set("maxmemory", used + 50_000)
        # The ballast itself may already be refused; either way Redis is now full.
        with contextlib.suppress(OutOfMemoryError):
            await redis.set("ballast", b"x" * 200_000)
        before = await snapshot(redis_url)
        try:
            r = await api.post("/v1/queues/mail-out/tasks", json={"name": "x"})
            found = problem(r, 503)
            assert "out of memory" in found["detail"]
            assert int(r.headers["retry-after"]) > 0
            assert await snapshot(redis_url) == before
        finally:
            await redis.config_set("maxmemory", 0)


async def test_refusals_say_the_rule_without_pydantics_prefix(api: httpx.AsyncClient) -> None:
    """A validator's own words reach the client as they are: pydantic's "Value error, " is not
    part of the reason (issue 31: "job_id: Value error, must be a ULID")."""
    found = problem(await api.get("/v1/tasks/not-a-ulid"), 422)
    reasons = [e["reason"] for e in found["errors"]]
    assert any(r.startswith("must be a ULID") for r in reasons), reasons
    found = problem(
        await api.post("/v1/queues/mail-out/tasks", json={"name": "x", "id": "not-a-ulid"}), 422
    )
    reasons = [e["reason"] for e in found["errors"]]
    assert any(r.startswith("must be a ULID") for r in reasons), reasons
    assert not any("Value error" in r for r in reasons), reasons
