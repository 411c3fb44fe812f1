"""``GET /v1/queues`` in pages: name order, every queue once, and the SDK following pages."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from gateway.settings import ApiKey, Settings
from sdk import AsyncClient
from sdk import api as sdk_api
from tests.support import gateway_client

ADMIN = "admin-key-0123456789"
NAMES = sorted(f"q-{i:03d}" for i in range(23))


@pytest.fixture
async def api(redis_url: str) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(redis_url=redis_url, api_keys=[ApiKey(key=ADMIN, scopes=["admin"])])
    async with gateway_client(settings, ADMIN) as client:
        puts = await asyncio.gather(*(client.put(f"/v1/queues/{n}", json={}) for n in NAMES))
        assert {r.status_code for r in puts} == {201}
        yield client


async def test_pages_cover_every_queue_once_in_name_order(api: httpx.AsyncClient) -> None:
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        params: dict[str, str | int] = {"limit": 10}
        if cursor is not None:
            params["cursor"] = cursor
        page = (await api.get("/v1/queues", params=params)).json()
        pages += 1
        assert len(page["items"]) <= 10
        seen += [q["name"] for q in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == NAMES
    assert pages == 3
    first = (await api.get("/v1/queues", params={"limit": 1})).json()["items"][0]
    assert first["name"] == NAMES[0]
    assert first["counts"]["queued"] == 0


async def test_a_cursor_of_a_deleted_queue_still_pages_on(api: httpx.AsyncClient) -> None:
    assert (await api.delete("/v1/queues/q-005")).status_code == 204
    page = (await api.get("/v1/queues", params={"limit": 2, "cursor": "q-005"})).json()
    assert [q["name"] for q in page["items"]] == ["q-006", "q-007"]


async def test_the_default_page_is_100_and_the_last_page_has_no_cursor(
    api: httpx.AsyncClient,
) -> None:
    page = (await api.get("/v1/queues")).json()
    assert [q["name"] for q in page["items"]] == NAMES
    assert page["next_cursor"] is None


@pytest.mark.parametrize(
    ("params", "field"),
    [({"limit": 0}, "limit"), ({"limit": 501}, "limit"), ({"cursor": "bad name!"}, "cursor")],
)
async def test_bad_paging_is_refused_by_field(
    api: httpx.AsyncClient, params: dict[str, str | int], field: str
) -> None:
    answer = await api.get("/v1/queues", params=params)
    assert answer.status_code == 422
    assert answer.headers["content-type"] == "application/problem+json"
    assert field in str(answer.json())


async def test_the_sdk_follows_every_page(api: httpx.AsyncClient) -> None:
    async with AsyncClient(str(api.base_url), ADMIN, transport=api._transport) as client:
        assert [q.name for q in await client.list_queues()] == NAMES
        # The plan the client drives, with pages smaller than the queues
        paged = await client._drive(sdk_api.list_queues(page_size=4))
    assert [q.name for q in paged] == NAMES
