"""Completion callbacks through the HTTP API: the notify URL is checked and shown."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from gateway.settings import ApiKey, Settings
from tests.support import gateway_client

ADMIN = "admin-key-0123456789"


@pytest.fixture
async def api(redis_url: str) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(redis_url=redis_url, api_keys=[ApiKey(key=ADMIN, scopes=["admin"])])
    async with gateway_client(settings, ADMIN) as client:
        assert (await client.put("/v1/queues/q", json={})).status_code == 201
        yield client


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://169.254.169.254/latest/meta-data", "link-local"),
        ("http://127.0.0.1:9/done", "loopback"),
        ("http://10.0.0.1/done", "private"),
        ("ftp://example.com/done", "pattern"),
    ],
)
async def test_a_notify_url_the_gateway_may_not_reach_is_refused_at_enqueue(
    api: httpx.AsyncClient, url: str, reason: str
) -> None:
    answer = await api.post("/v1/queues/q/tasks", json={"name": "t", "notify": url})
    assert answer.status_code == 422, answer.text
    (error,) = answer.json()["errors"]
    assert error["field"] == "notify"
    assert reason in error["reason"]
    assert (await api.get("/v1/queues/q/tasks")).json()["items"] == []


async def test_a_batch_names_the_task_whose_notify_url_is_refused(
    api: httpx.AsyncClient,
) -> None:
    answer = await api.post(
        "/v1/queues/q/tasks/batch",
        json={"tasks": [{"name": "a"}, {"name": "b", "notify": "http://127.0.0.1/x"}]},
    )
    assert answer.status_code == 422, answer.text
    assert [e["field"] for e in answer.json()["errors"]] == ["tasks.1.notify"]


async def test_the_notify_url_is_kept_and_shown(redis_url: str) -> None:
    settings = Settings(
        redis_url=redis_url,
        api_keys=[ApiKey(key=ADMIN, scopes=["admin"])],
        allow_private_endpoints=True,
    )
    async with gateway_client(settings, ADMIN) as api:
        await api.put("/v1/queues/q", json={})
        created = await api.post(
            "/v1/queues/q/tasks", json={"name": "t", "notify": "http://127.0.0.1:9/done"}
        )
        assert created.status_code == 201, created.text
        assert created.json()["notify"] == "http://127.0.0.1:9/done"
        task = (await api.get(f"/v1/tasks/{created.json()['id']}")).json()
        assert task["notify"] == "http://127.0.0.1:9/done"
        assert task["notice"] is None


async def test_the_notify_secret_is_for_the_queues_producers_and_stable(redis_url: str) -> None:
    producer, reader = "producer-key-0123456789", "reader-key-0123456789"
    settings = Settings(
        redis_url=redis_url,
        api_keys=[
            ApiKey(key=ADMIN, scopes=["admin"]),
            ApiKey(key=producer, scopes=["enqueue:q"]),
            ApiKey(key=reader, scopes=["read"]),
        ],
    )
    async with gateway_client(settings, ADMIN) as api:
        await api.put("/v1/queues/q", json={})
        await api.put("/v1/queues/other", json={})
        first = await api.get("/v1/queues/q/notify-secret")
        assert first.status_code == 200, first.text
        assert first.json()["secret"].startswith("whsec_")
        as_producer = {"authorization": f"Bearer {producer}"}
        again = await api.get("/v1/queues/q/notify-secret", headers=as_producer)
        assert again.json() == first.json()
        other = await api.get("/v1/queues/other/notify-secret", headers=as_producer)
        assert other.status_code == 403
        as_reader = {"authorization": f"Bearer {reader}"}
        assert (await api.get("/v1/queues/q/notify-secret", headers=as_reader)).status_code == 403
        assert (await api.get("/v1/queues/nope/notify-secret")).status_code == 404
        assert (await api.get("/v1/queues/other/notify-secret")).json()["secret"] != first.json()[
            "secret"
        ]


async def test_an_admin_rotates_the_notify_secret_with_an_overlap(redis_url: str) -> None:
    producer = "producer-key-0123456789"
    settings = Settings(
        redis_url=redis_url,
        api_keys=[ApiKey(key=ADMIN, scopes=["admin"]), ApiKey(key=producer, scopes=["enqueue:q"])],
    )
    async with gateway_client(settings, ADMIN) as api:
        await api.put("/v1/queues/q", json={})
        first = (await api.get("/v1/queues/q/notify-secret")).json()
        assert first["previous_secret_until"] is None

        as_producer = {"authorization": f"Bearer {producer}"}
        refused = await api.post("/v1/queues/q/notify-secret", json={}, headers=as_producer)
        assert refused.status_code == 403  # producers read the secret; only admins rotate it
        assert (await api.post("/v1/queues/nope/notify-secret", json={})).status_code == 404
        bad = await api.post("/v1/queues/q/notify-secret", json={"overlap": -1})
        assert bad.status_code == 422
        assert [e["field"] for e in bad.json()["errors"]] == ["overlap"]

        rotated = await api.post("/v1/queues/q/notify-secret", json={"overlap": 3600})
        assert rotated.status_code == 200, rotated.text
        second = rotated.json()
        assert second["secret"].startswith("whsec_")
        assert second["secret"] != first["secret"]
        assert second["previous_secret_until"] is not None
        shown = await api.get("/v1/queues/q/notify-secret", headers=as_producer)
        assert shown.json() == second

        at_once = (await api.post("/v1/queues/q/notify-secret", json={"overlap": 0})).json()
        assert at_once["secret"] not in (first["secret"], second["secret"])
        assert at_once["previous_secret_until"] is None  # the previous one stopped at once
