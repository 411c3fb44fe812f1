"""``POST /v1/queues/{queue}/leases`` on a real gateway and Redis: what it answers, who may call
it, and the long poll — woken by an enqueue here or on another gateway, silent towards Redis
while it waits, ended at once by the gateway's shutdown."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis
from starlette.applications import Starlette

from gateway.app import create_app
from gateway.serving.server import serve_async
from gateway.settings import ApiKey, Settings
from sdk.callbacks import CallbackChannel
from sdk.errors import LeaseLost
from sdk.wire import PushBatch
from tests.support import bind, gateway_app, redis_commands_in, until

ADMIN = "admin-key-0123456789"
WORKER = "worker-key-0123456789"
READER = "reader-key-0123456789"
PRODUCER = "producer-key-0123456789"
KEYS = [
    ApiKey(key=ADMIN, scopes=["admin"]),
    ApiKey(key=WORKER, scopes=["work:mail-*"]),
    ApiKey(key=READER, scopes=["read"]),
    ApiKey(key=PRODUCER, scopes=["enqueue:*"]),
]


def settings_for(redis_url: str, **extra: Any) -> Settings:
    return Settings(redis_url=redis_url, api_keys=KEYS, allow_private_endpoints=True, **extra)


def gateway(settings: Settings) -> Any:
    """An admin client on a gateway app run in-process, and the app."""
    return gateway_app(settings, ADMIN, timeout=30)


async def pull_queue(
    api: httpx.AsyncClient,
    queue: str = "mail-out",
    policy: dict[str, Any] | None = None,
    **endpoint: Any,
) -> str:
    """A queue (with ``policy``) and one pull endpoint; its id."""
    (await api.put(f"/v1/queues/{queue}", json=policy or {})).raise_for_status()
    r = await api.post(f"/v1/queues/{queue}/endpoints", json={"pull": True, **endpoint})
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


async def enqueue(api: httpx.AsyncClient, queue: str = "mail-out", name: str = "send") -> str:
    r = await api.post(f"/v1/queues/{queue}/tasks", json={"name": name, "payload": {"args": []}})
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


async def lease(
    api: httpx.AsyncClient, endpoint_id: str, queue: str = "mail-out", **body: Any
) -> httpx.Response:
    return await api.post(f"/v1/queues/{queue}/leases", json={"endpoint_id": endpoint_id, **body})


async def test_pull_endpoint_registration_checks_url(redis_url: str) -> None:
    async with gateway(settings_for(redis_url)) as (api, _):
        (await api.put("/v1/queues/mail-out", json={})).raise_for_status()
        r = await api.post(
            "/v1/queues/mail-out/endpoints", json={"pull": True, "url": "http://x.example/"}
        )
        assert r.status_code == 422
        assert [e["field"] for e in r.json()["errors"]] == ["url"]
        r = await api.post("/v1/queues/mail-out/endpoints", json={"concurrency": 2})
        assert r.status_code == 422
        assert [e["field"] for e in r.json()["errors"]] == ["url"]
        r = await api.post("/v1/queues/mail-out/endpoints", json={"pull": True})
        assert r.status_code == 201
        assert r.json()["pull"] is True
        assert r.json()["url"] is None
        listed = (await api.get("/v1/queues/mail-out/endpoints")).json()["items"]
        assert [(e["pull"], e["url"]) for e in listed] == [(True, None)]


async def test_lease_answers_a_push_batch_and_the_callbacks_finish_the_task(
    redis_url: str,
) -> None:
    async with gateway(settings_for(redis_url)) as (api, _):
        endpoint_id = await pull_queue(api)
        task_id = await enqueue(api)
        r = await lease(api, endpoint_id, max_tasks=5)
        assert r.status_code == 200, r.text
        batch = PushBatch.model_validate_json(r.content)
        [item] = batch.tasks
        assert (item.id, item.name, item.attempt, item.payload) == (
            task_id,
            "send",
            1,
            {"args": []},
        )
        assert item.callback.endswith(f"/v1/callbacks/mail-out/{task_id}")
        task = (await api.get(f"/v1/tasks/{task_id}")).json()
        assert task["state"] == "running"
        assert task["attempts"][-1]["endpoint_id"] == endpoint_id

        callback = item.callback.split("://", 1)[1].split("/", 1)[1]
        lease_header = {"jobgate-lease": item.lease}
        beat = await api.post(f"/{callback}/heartbeat", json={}, headers=lease_header)
        assert beat.status_code == 200, beat.text
        done = await api.post(f"/{callback}/result", json={"result": 7}, headers=lease_header)
        assert done.status_code == 200, done.text
        task = (await api.get(f"/v1/tasks/{task_id}")).json()
        assert (task["state"], task["result"]) == ("succeeded", 7)
        # Room again on the endpoint; nothing left to lease.
        r = await lease(api, endpoint_id)
        assert r.json() == {"tasks": []}


async def test_lease_refuses_push_and_unknown_endpoints_and_queues(redis_url: str) -> None:
    async with gateway(settings_for(redis_url)) as (api, _):
        await pull_queue(api)
        r = await api.post("/v1/queues/mail-out/endpoints", json={"url": "http://127.0.0.1:9/"})
        push_id = r.json()["id"]
        r = await lease(api, push_id)
        assert r.status_code == 422
        assert [e["field"] for e in r.json()["errors"]] == ["endpoint_id"]
        assert (await lease(api, "ep_nope")).status_code == 404
        assert (await lease(api, "ep_nope", queue="mail-none")).status_code == 404
        r = await api.post("/v1/queues/mail-out/leases", json={"endpoint_id": "x", "wait": 61})
        assert r.status_code == 422
        assert [e["field"] for e in r.json()["errors"]] == ["wait"]


async def test_work_scope_leases_from_matching_queues_only(redis_url: str) -> None:
    async with gateway(settings_for(redis_url)) as (api, _):
        endpoint_id = await pull_queue(api, "mail-out")
        other_id = await pull_queue(api, "billing")
        await enqueue(api, "mail-out")

        async def as_key(key: str, queue: str, endpoint: str) -> int:
            r = await api.post(
                f"/v1/queues/{queue}/leases",
                json={"endpoint_id": endpoint},
                headers={"authorization": f"Bearer {key}"},
            )
            return r.status_code

        assert await as_key(WORKER, "billing", other_id) == 403
        assert await as_key(READER, "mail-out", endpoint_id) == 403
        assert await as_key(PRODUCER, "mail-out", endpoint_id) == 403
        assert await as_key(WORKER, "mail-out", endpoint_id) == 200
        # The work scope gives nothing else.
        r = await api.get("/v1/queues", headers={"authorization": f"Bearer {WORKER}"})
        assert r.status_code == 403


async def test_wait_zero_answers_at_once(redis_url: str) -> None:
    async with gateway(settings_for(redis_url)) as (api, _):
        endpoint_id = await pull_queue(api)
        started = time.monotonic()
        r = await lease(api, endpoint_id, wait=0)
        assert r.json() == {"tasks": []}
        assert time.monotonic() - started < 1


async def test_long_poll_wakes_on_an_enqueue_here(redis_url: str) -> None:
    async with gateway(settings_for(redis_url)) as (api, app):
        endpoint_id = await pull_queue(api)
        started = time.monotonic()
        poll = asyncio.create_task(lease(api, endpoint_id, wait=20))
        await until(lambda: app.state.pull_waiters.waiting("mail-out"), what="the poll to wait")
        task_id = await enqueue(api)
        r = await asyncio.wait_for(poll, 10)
        assert [t["id"] for t in r.json()["tasks"]] == [task_id]
        assert time.monotonic() - started < 10


async def test_long_poll_wakes_on_an_enqueue_through_another_gateway(redis_url: str) -> None:
    async with (
        gateway(settings_for(redis_url)) as (api, app),
        gateway(settings_for(redis_url)) as (other, _),
    ):
        endpoint_id = await pull_queue(api)
        poll = asyncio.create_task(lease(api, endpoint_id, wait=20))
        await until(lambda: app.state.pull_waiters.waiting("mail-out"), what="the poll to wait")
        task_id = await enqueue(other)
        r = await asyncio.wait_for(poll, 10)
        assert [t["id"] for t in r.json()["tasks"]] == [task_id]


async def test_long_poll_waits_out_a_full_endpoint_and_gets_the_freed_room(
    redis_url: str,
) -> None:
    async with gateway(settings_for(redis_url)) as (api, app):
        endpoint_id = await pull_queue(api, concurrency=1)
        await enqueue(api)
        second = await enqueue(api)
        [item] = PushBatch.model_validate_json((await lease(api, endpoint_id)).content).tasks
        poll = asyncio.create_task(lease(api, endpoint_id, wait=20))
        await until(lambda: app.state.pull_waiters.waiting("mail-out"), what="the poll to wait")
        assert not poll.done()
        r = await api.post(
            f"/v1/callbacks/mail-out/{item.id}/result",
            json={"result": None},
            headers={"jobgate-lease": item.lease},
        )
        assert r.status_code == 200
        r = await asyncio.wait_for(poll, 10)
        assert [t["id"] for t in r.json()["tasks"]] == [second]


async def test_an_idle_long_poll_sends_no_redis_command(redis_url: str) -> None:
    async with (
        Redis.from_url(redis_url) as redis,
        gateway(settings_for(redis_url, recover_interval=0.05)) as (api, app),
    ):
        endpoint_id = await pull_queue(api)

        poll = asyncio.create_task(lease(api, endpoint_id, wait=30))
        await until(lambda: app.state.pull_waiters.waiting("mail-out"), what="the poll to wait")
        used = await redis_commands_in(redis, 1.0)
        assert used == 0
        assert not poll.done()
        task_id = await enqueue(api)
        r = await asyncio.wait_for(poll, 10)
        assert [t["id"] for t in r.json()["tasks"]] == [task_id]


async def test_gateway_shutdown_answers_waiting_polls_at_once(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    apps: list[Starlette] = []

    def recording_create_app(settings: Settings) -> Starlette:
        apps.append(create_app(settings))
        return apps[-1]

    monkeypatch.setattr("gateway.serving.server.create_app", recording_create_app)
    sock = bind()
    port = sock.getsockname()[1]
    sock.close()
    stop = asyncio.Event()
    ready = asyncio.Event()
    settings = settings_for(redis_url, port=port, host="127.0.0.1")
    server = asyncio.create_task(serve_async(settings, stop, on_ready=lambda _: ready.set()))
    await asyncio.wait_for(ready.wait(), 20)
    async with httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{port}",
        headers={"authorization": f"Bearer {ADMIN}"},
        timeout=60,
    ) as api:
        endpoint_id = await pull_queue(api)
        poll = asyncio.create_task(lease(api, endpoint_id, wait=50))
        waiters = apps[0].state.pull_waiters
        await until(lambda: waiters.waiting("mail-out"), what="the poll to wait")
        started = time.monotonic()
        stop.set()
        r = await asyncio.wait_for(poll, 10)
        assert r.status_code == 200
        assert r.json() == {"tasks": []}
        assert time.monotonic() - started < 2.5  # answered, not cut off at Hypercorn's grace
    await asyncio.wait_for(server, 20)


async def test_a_forced_queue_delete_ends_the_callbacks_of_its_running_tasks(
    redis_url: str,
) -> None:
    """The gateway's 404 for a task deleted while it ran is what the SDK reads as the lease
    lost: the worker stops the task rather than heartbeat into the void."""
    async with gateway(settings_for(redis_url)) as (api, _):
        endpoint_id = await pull_queue(api)
        await enqueue(api)
        r = await lease(api, endpoint_id)
        (item,) = PushBatch.model_validate_json(r.content).tasks
        callback_path = httpx.URL(item.callback).path
        channel = CallbackChannel(api, callback_path, item.lease, item.lease_expires_at)
        assert await channel.heartbeat(0.5) is False  # running: heard

        assert (await api.delete("/v1/queues/mail-out?force=true")).status_code == 204

        with pytest.raises(LeaseLost, match=r"not registered|no task"):
            await channel.heartbeat(0.6)
        assert channel.lost
