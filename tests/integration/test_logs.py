"""A task's log lines against a real Redis: the cap keeps the last lines and says how many were
dropped; pages follow a cursor; JSON Lines are streamed a page of Redis reads at a time."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest

from gateway.services import logs as log_service
from gateway.settings import ApiKey, Settings
from gateway.store.clock import ManualClock
from gateway.store.tasks import TaskStore
from tests.support import gateway_client

from .conftest import Stores
from .test_store import new_task, seed, setup_queue

ADMIN = "admin-key-0123456789"
READER = "reader-key-0123456789"


@dataclass
class Running:
    task_id: str
    token: str


async def running_task(s: Stores) -> Running:
    s.clock = ManualClock(int(time.time() * 1000))  # an app's gateway must not expire the lease
    await setup_queue(s)
    now = s.clock.now_ms()
    task = new_task(now)
    await s.tasks.enqueue("q", [task], now)
    (lease,) = (await s.tasks.claim("q", 1, seed(), now)).leases
    return Running(task.id, lease.token)


def lines(start: int, stop: int) -> list[str]:
    return [json.dumps({"message": f"line {i}"}) for i in range(start, stop)]


@pytest.fixture
async def run(stores: Stores) -> Running:
    """A running task, leased before the gateway app starts (its dispatcher would take it)."""
    return await running_task(stores)


@pytest.fixture
async def api(redis_url: str, run: Running) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(
        redis_url=redis_url,
        log_lines_kept=10,
        api_keys=[ApiKey(key=ADMIN, scopes=["admin"]), ApiKey(key=READER, scopes=["read"])],
    )
    async with gateway_client(settings, READER) as client:
        yield client


async def log_callback(api: httpx.AsyncClient, run: Running, start: int, stop: int) -> None:
    answer = await api.post(
        f"/v1/callbacks/q/{run.task_id}/logs",
        json={"lines": [{"message": f"line {i}"} for i in range(start, stop)]},
        headers={"jobgate-lease": run.token},
    )
    assert answer.status_code == 200, answer.text


async def test_the_store_keeps_the_last_lines_and_counts_the_dropped_ones(
    stores: Stores, run: Running
) -> None:
    await stores.tasks.append_log("q", run.task_id, run.token, lines(0, 4), keep=6)
    record = await stores.tasks.record("q", run.task_id)
    assert record is not None
    assert "logd" not in record  # nothing dropped, the record untouched
    await stores.tasks.append_log("q", run.task_id, run.token, lines(4, 9), keep=6)
    await stores.tasks.append_log("q", run.task_id, run.token, lines(9, 10), keep=6)
    found = await stores.tasks.log_page("q", run.task_id, 0, 100)
    assert found is not None
    assert (found.dropped, found.kept) == (4, 6)
    assert [json.loads(x)["message"] for x in found.lines] == [f"line {i}" for i in range(4, 10)]


async def test_the_log_says_how_many_lines_were_dropped_and_pages_by_line_number(
    run: Running, api: httpx.AsyncClient
) -> None:
    await log_callback(api, run, 0, 8)
    page = (await api.get(f"/v1/tasks/{run.task_id}/logs")).json()
    assert (page["first_line"], page["dropped"], page["next_cursor"]) == (0, 0, None)
    assert len(page["items"]) == 8

    await log_callback(api, run, 8, 15)  # 15 lines logged, 10 kept (log_lines_kept)
    page = (await api.get(f"/v1/tasks/{run.task_id}/logs", params={"limit": 4})).json()
    assert (page["first_line"], page["dropped"], page["next_cursor"]) == (5, 5, "9")
    assert [i["message"] for i in page["items"]] == ["line 5", "line 6", "line 7", "line 8"]
    page = (
        await api.get(f"/v1/tasks/{run.task_id}/logs", params={"limit": 4, "cursor": "9"})
    ).json()
    assert [i["message"] for i in page["items"]] == ["line 9", "line 10", "line 11", "line 12"]
    assert page["next_cursor"] == "13"
    # More lines drop more; the cursor keeps pointing at the same line while it is kept.
    await log_callback(api, run, 15, 17)
    page = (
        await api.get(f"/v1/tasks/{run.task_id}/logs", params={"limit": 4, "cursor": "13"})
    ).json()
    assert [i["message"] for i in page["items"]] == ["line 13", "line 14", "line 15", "line 16"]
    assert (page["dropped"], page["next_cursor"]) == (7, None)
    # A cursor into lines dropped since starts at the first kept line.
    page = (await api.get(f"/v1/tasks/{run.task_id}/logs", params={"cursor": "2"})).json()
    assert page["first_line"] == 7
    assert page["items"][0]["message"] == "line 7"
    assert len(page["items"]) == 10
    task = (await api.get(f"/v1/tasks/{run.task_id}")).json()
    assert task["state"] == "running"


async def test_json_lines_are_streamed_a_page_at_a_time(
    stores: Stores, run: Running, api: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    for start in range(0, 1000, 100):  # 1000 lines, the last 1000 of 1000 kept
        await stores.tasks.append_log(
            "q", run.task_id, run.token, lines(start, start + 100), keep=1000
        )
    await stores.tasks.append_log("q", run.task_id, run.token, lines(1000, 1050), keep=1000)
    reads: list[tuple[int, int]] = []
    original = TaskStore.log_page

    async def counted(self: TaskStore, queue: str, task_id: str, first: int, count: int):  # type: ignore[no-untyped-def]
        reads.append((first, count))
        return await original(self, queue, task_id, first, count)

    monkeypatch.setattr(TaskStore, "log_page", counted)
    monkeypatch.setattr(log_service, "STREAM_PAGE", 300)
    async with api.stream(
        "GET", f"/v1/tasks/{run.task_id}/logs", headers={"accept": "application/jsonl"}
    ) as answer:
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("application/jsonl")
        assert answer.headers["jobgate-log-dropped"] == "50"
        body = [json.loads(x) async for x in answer.aiter_lines() if x]
    assert [x["message"] for x in body] == [f"line {i}" for i in range(50, 1050)]
    assert reads == [(0, 300), (350, 300), (650, 300), (950, 300)]

    reads.clear()
    async with api.stream(
        "GET",
        f"/v1/tasks/{run.task_id}/logs",
        params={"cursor": "1000"},
        headers={"accept": "application/jsonl"},
    ) as answer:
        body = [json.loads(x) async for x in answer.aiter_lines() if x]
    assert [x["message"] for x in body] == [f"line {i}" for i in range(1000, 1050)]
    assert reads == [(1000, 300)]


async def test_logs_of_an_unknown_task_are_404_in_either_form(api: httpx.AsyncClient) -> None:
    missing = "01J00000000000000000000000"
    assert (await api.get(f"/v1/tasks/{missing}/logs")).status_code == 404
    streamed = await api.get(f"/v1/tasks/{missing}/logs", headers={"accept": "application/jsonl"})
    assert streamed.status_code == 404
    assert streamed.headers["content-type"] == "application/problem+json"
