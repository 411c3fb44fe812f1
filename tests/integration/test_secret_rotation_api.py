"""``POST /v1/queues/{queue}/endpoints/{endpoint_id}/secret`` against a real Redis: a new
secret shown once, the window recorded, and refusals that change nothing."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import pytest
from redis.asyncio import Redis

from gateway.settings import ApiKey, Settings
from gateway.store.keys import QueueKeys
from tests.support import gateway_client

ADMIN = "rotation-admin-key-0123"
READER = "rotation-reader-key-012"


@pytest.fixture
async def api(redis_url: str) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(
        redis_url=redis_url,
        allow_private_endpoints=True,
        api_keys=[ApiKey(key=ADMIN, scopes=["admin"]), ApiKey(key=READER, scopes=["read"])],
    )
    async with gateway_client(settings, ADMIN) as client:
        assert (await client.put("/v1/queues/mail", json={})).status_code == 201
        yield client


async def stored(redis_url: str) -> dict[bytes, bytes]:
    async with Redis.from_url(redis_url) as redis:
        return await redis.hgetall(QueueKeys.of("mail").endpoints)  # type: ignore[no-any-return]


async def secrets_kept(redis_url: str) -> list[str]:
    (record,) = (await stored(redis_url)).values()
    return list(json.loads(record)["secrets"])


async def test_rotation_keeps_the_previous_secret_for_the_overlap(
    api: httpx.AsyncClient, redis_url: str
) -> None:
    made = (await api.post("/v1/queues/mail/endpoints", json={"url": "http://127.0.0.1:9/"})).json()
    rotated = await api.post(
        f"/v1/queues/mail/endpoints/{made['id']}/secret", json={"overlap": 3600}
    )
    assert rotated.status_code == 200
    body = rotated.json()
    assert body["secret"].startswith("whsec_")
    assert body["secret"] != made["secret"]
    assert body["previous_secret_until"] is not None
    listed = (await api.get("/v1/queues/mail/endpoints")).json()["items"][0]
    assert "secret" not in listed
    assert listed["previous_secret_until"] == body["previous_secret_until"]
    assert await secrets_kept(redis_url) == [body["secret"], made["secret"]]

    again = await api.post(f"/v1/queues/mail/endpoints/{made['id']}/secret", json={})
    # only the newest two are kept
    assert await secrets_kept(redis_url) == [again.json()["secret"], body["secret"]]


async def test_refusals_change_nothing(api: httpx.AsyncClient, redis_url: str) -> None:
    made = (await api.post("/v1/queues/mail/endpoints", json={"url": "http://127.0.0.1:9/"})).json()
    before = await stored(redis_url)
    url = f"/v1/queues/mail/endpoints/{made['id']}/secret"
    assert (await api.post("/v1/queues/mail/endpoints/ep_nope/secret", json={})).status_code == 404
    assert (await api.post("/v1/queues/nope/endpoints/x/secret", json={})).status_code == 404
    for overlap in (-1, 31 * 86_400, "60", True):
        answer = await api.post(url, json={"overlap": overlap})
        assert answer.status_code == 422, overlap
        assert answer.json()["errors"][0]["field"] == "overlap"
    reader = await api.post(url, json={}, headers={"authorization": f"Bearer {READER}"})
    assert reader.status_code == 403
    assert await stored(redis_url) == before


async def test_an_endpoint_is_disabled_and_enabled_again(
    api: httpx.AsyncClient, redis_url: str
) -> None:
    made = (await api.post("/v1/queues/mail/endpoints", json={"url": "http://127.0.0.1:9/"})).json()
    url = f"/v1/queues/mail/endpoints/{made['id']}"
    off = await api.patch(url, json={"enabled": False})
    assert off.status_code == 200
    assert (off.json()["enabled"], off.json()["disabled_reason"]) == (False, "disabled by an admin")
    (record,) = (await stored(redis_url)).values()
    assert json.loads(record)["secrets"] == [made["secret"]]  # nothing else touched
    on = (await api.patch(url, json={"enabled": True})).json()
    assert (on["enabled"], on["disabled_reason"]) == (True, None)
    listed = (await api.get("/v1/queues/mail/endpoints")).json()["items"][0]
    assert listed["enabled"] is True
    before = await stored(redis_url)
    assert (
        await api.patch("/v1/queues/mail/endpoints/ep_x", json={"enabled": False})
    ).status_code == 404
    assert (await api.patch(url, json={"enabled": "no"})).status_code == 422
    reader = await api.patch(
        url, json={"enabled": False}, headers={"authorization": f"Bearer {READER}"}
    )
    assert reader.status_code == 403
    assert await stored(redis_url) == before
