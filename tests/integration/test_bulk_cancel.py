"""``POST /v1/queues/{queue}/tasks/cancel`` against a real Redis: the tasks matching a filter
are cancelled (and only they), up to the limit; refusals change nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from gateway.services import bulk
from gateway.services.tasks import TaskService
from gateway.settings import ApiKey, Settings
from tests.support import gateway_client

ADMIN = "bulk-cancel-admin-key-0"
READER = "bulk-cancel-reader-key-"


@pytest.fixture
async def api(redis_url: str) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(
        redis_url=redis_url,
        api_keys=[ApiKey(key=ADMIN, scopes=["admin"]), ApiKey(key=READER, scopes=["read"])],
    )
    async with gateway_client(settings, ADMIN) as client:
        assert (await client.put("/v1/queues/mail", json={"paused": True})).status_code == 201
        yield client


async def enqueue(api: httpx.AsyncClient, name: str, owner: str | None = None) -> str:
    body = {"name": name, **({"owner": owner} if owner else {})}
    made = await api.post("/v1/queues/mail/tasks", json=body)
    assert made.status_code == 201, made.text
    return str(made.json()["id"])


async def state(api: httpx.AsyncClient, task_id: str) -> str:
    return str((await api.get(f"/v1/tasks/{task_id}")).json()["state"])


async def test_the_tasks_matching_are_cancelled_up_to_the_limit(api: httpx.AsyncClient) -> None:
    a = [await enqueue(api, "send", "acme") for _ in range(3)]
    other_owner = await enqueue(api, "send", "globex")
    other_name = await enqueue(api, "bill", "acme")
    url = "/v1/queues/mail/tasks/cancel"
    done = await api.post(url, json={"name": "send", "owner": "acme", "limit": 2})
    assert done.status_code == 200, done.text
    assert done.json() == {"cancelled": a[:2], "cancel_requested": [], "skipped": []}
    assert [await state(api, t) for t in a] == ["cancelled", "cancelled", "queued"]
    rest = (await api.post(url, json={"name": "send"})).json()
    assert rest["cancelled"] == [a[2], other_owner]
    assert await state(api, other_name) == "queued"
    assert (await api.post(url, json={})).json()["cancelled"] == [other_name]


async def test_refusals_cancel_nothing(api: httpx.AsyncClient) -> None:
    task = await enqueue(api, "send")
    url = "/v1/queues/mail/tasks/cancel"
    for body in ({"state": "succeeded"}, {"limit": 0}, {"limit": 1001}, {"owner": ""}):
        assert (await api.post(url, json=body)).status_code == 422, body
    assert (await api.post("/v1/queues/nope/tasks/cancel", json={})).status_code == 404
    reader = await api.post(url, json={}, headers={"authorization": f"Bearer {READER}"})
    assert reader.status_code == 403
    assert await state(api, task) == "queued"


async def test_a_task_listed_twice_while_the_index_moves_is_cancelled_and_counted_once(
    api: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The listing pages through the queued index by offset while tasks come and go: a task
    enqueued ahead of the ones already listed moves them one place back, so the next page
    starts with one already listed. It is cancelled once and counted once, and the walk goes on
    to the limit."""
    first, second = await enqueue(api, "send"), await enqueue(api, "send")
    search = TaskService.search
    pages = 0
    jumped: list[str] = []

    async def search_while_one_jumps_the_queue(self: TaskService, *args: Any, **kw: Any) -> Any:
        nonlocal pages
        found = await search(self, *args, **kw)
        pages += 1
        if pages == 1:  # between the first page and the second
            made = await api.post("/v1/queues/mail/tasks", json={"name": "send", "priority": 9})
            assert made.status_code == 201, made.text
            jumped.append(made.json()["id"])
        return found

    monkeypatch.setattr(bulk, "STEP", 1)
    monkeypatch.setattr(TaskService, "search", search_while_one_jumps_the_queue)
    done = await api.post("/v1/queues/mail/tasks/cancel", json={"limit": 2})
    assert done.status_code == 200, done.text
    assert pages == 3  # [first], [first] again, [second]
    assert done.json() == {"cancelled": [first, second], "cancel_requested": [], "skipped": []}
    assert await state(api, jumped[0]) == "queued"
