"""Events and triggers in-process against a real Redis: fan-out once per trigger, the same id
twice, filters, an event whose gateway stopped half way finished by the upkeep with the same
task ids, the retention sweep, the recent events a wait reads, and the scopes."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from pydantic import ValidationError
from redis.asyncio import Redis

from gateway.app import create_app
from gateway.background.event_upkeep import EventUpkeep
from gateway.services import Services
from gateway.services.event_types import AcceptedEvent
from gateway.services.triggers import trigger_task_id
from gateway.settings import ApiKey, Settings
from gateway.store.clock import ManualClock
from gateway.store.events import EventStore, StoredEvent
from gateway.store.scripts import Scripts
from sdk import AsyncClient, Client, task
from sdk.wire import TaskArgs

from .test_api import problem

ADMIN = "admin-key-0123456789"
BILLING = "billing-key-0123456789"
READER = "reader-key-0123456789"
QUEUES = ("mail", "crm", "audit")
DAY_MS = 86_400_000


@dataclass
class Env:
    api: httpx.AsyncClient
    services: Services
    redis: Redis
    store: EventStore

    def as_key(self, key: str) -> dict[str, str]:
        return {"authorization": f"Bearer {key}"}


@pytest.fixture
async def env(redis_url: str) -> AsyncIterator[Env]:
    settings = Settings(
        redis_url=redis_url,
        api_keys=[
            ApiKey(key=ADMIN, scopes=["admin"]),
            ApiKey(key=BILLING, scopes=["events:billing.*"]),
            ApiKey(key=READER, scopes=["read"]),
        ],
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app) as state:

        async def with_state(scope: Any, receive: Any, send: Any) -> None:
            scope["state"] = dict(state)
            await app(scope, receive, send)

        redis = Redis.from_url(redis_url, decode_responses=True)
        scripts = Scripts(redis)
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=with_state),
            base_url="http://gateway",
            headers={"authorization": f"Bearer {ADMIN}"},
        ) as api:
            for queue in QUEUES:
                assert (await api.put(f"/v1/queues/{queue}", json={})).status_code == 201
            yield Env(api, state["services"], redis, EventStore(redis, scripts))
        await redis.aclose()


async def trigger(env: Env, trigger_id: str, queue: str, **fields: Any) -> dict[str, Any]:
    body = {"event": "user.created", "queue": queue, "task": "welcome", **fields}
    r = await env.api.put(f"/v1/triggers/{trigger_id}", json=body)
    assert r.status_code == 201, r.text
    return dict(r.json())


async def three_triggers(env: Env) -> None:
    for queue in QUEUES:
        await trigger(env, f"on-{queue}", queue)


async def publish(env: Env, status: int = 201, **body: Any) -> dict[str, Any]:
    r = await env.api.post("/v1/events", json={"name": "user.created", **body})
    assert r.status_code == status, r.text
    return dict(r.json())


async def task_ids(env: Env, queue: str) -> list[str]:
    r = await env.api.get(f"/v1/queues/{queue}/tasks", params={"state": "queued"})
    assert r.status_code == 200, r.text
    return sorted(t["id"] for t in r.json()["items"])


async def test_an_event_starts_one_task_per_trigger(env: Env) -> None:
    await three_triggers(env)
    event = await publish(env, data={"user": 7}, id="signup-7")
    assert event["state"] == "done"
    started = {t["by"]: t for t in event["started"]}
    assert sorted(started) == ["on-audit", "on-crm", "on-mail"]
    accepted = AcceptedEvent("signup-7", "user.created", {"user": 7}, event["accepted_ms"])
    for queue in QUEUES:
        task_id = trigger_task_id(accepted, f"on-{queue}")
        assert started[f"on-{queue}"] == {"queue": queue, "id": task_id, "by": f"on-{queue}"}
        assert await task_ids(env, queue) == [task_id]
        task = (await env.api.get(f"/v1/tasks/{task_id}")).json()
        assert task["name"] == "welcome"
        assert task["payload"] == {
            "kwargs": {"event": {"id": "signup-7", "name": "user.created", "data": {"user": 7}}}
        }
    assert (await env.api.get("/v1/events/signup-7")).json() == event
    listed = (await env.api.get("/v1/events", params={"name": "user.created"})).json()
    assert [e["id"] for e in listed["items"]] == ["signup-7"]


async def test_the_same_id_twice_is_one_event(env: Env) -> None:
    await three_triggers(env)
    first = await publish(env, data={"user": 1}, id="e-1")
    again = await publish(env, status=200, data={"user": 2}, id="e-1")
    assert again == first  # the first's data stands
    for queue in QUEUES:
        assert len(await task_ids(env, queue)) == 1
    made = await publish(env, data={"user": 3})  # no id: the gateway makes one
    assert len(made["id"]) == 26
    assert len(made["started"]) == 3


async def test_a_trigger_filter_matches_top_level_fields(env: Env) -> None:
    await trigger(env, "pro", "crm", filter={"plan": "pro", "seats": 5})
    await trigger(env, "all", "mail")
    basic = await publish(env, data={"plan": "basic", "seats": 5})
    assert [t["by"] for t in basic["started"]] == ["all"]
    pro = await publish(env, data={"plan": "pro", "seats": 5.0, "more": True})
    assert [t["by"] for t in pro["started"]] == ["all", "pro"]
    none = await publish(env, data={"seats": 5})
    assert [t["by"] for t in none["started"]] == ["all"]
    assert len(await task_ids(env, "crm")) == 1


async def test_a_pending_event_is_finished_by_the_upkeep_with_the_same_tasks(env: Env) -> None:
    await three_triggers(env)
    now = 1_900_000_000_000
    # A gateway stopped after writing the record and starting one trigger's task.
    stored = StoredEvent("half-way", "user.created", {"user": 9}, now)
    await env.store.hold(stored.id, now + 10_000)
    assert await env.store.create(stored) is None
    accepted = AcceptedEvent(stored.id, stored.name, stored.data, now)
    spec = {
        "id": trigger_task_id(accepted, "on-mail"),
        "name": "welcome",
        "payload": {"kwargs": {"event": {"id": stored.id, "name": stored.name, "data": {}}}},
    }
    assert (await env.api.post("/v1/queues/mail/tasks", json=spec)).status_code == 201
    # Another stopped before writing its record: nothing ran, the entry is dropped.
    await env.store.hold("never-written", now + 10_000)

    upkeep = EventUpkeep(env.services.events, ManualClock(), sweep_interval=60)
    assert (await upkeep.step(now + 5_000)).finished == 0  # its lease has not run out
    assert (await upkeep.step(now + 10_000)).finished == 1
    assert await env.redis.zrange("jg:events:pending", 0, -1) == []
    event = (await env.api.get("/v1/events/half-way")).json()
    assert event["state"] == "done"
    for queue in QUEUES:
        task_id = trigger_task_id(accepted, f"on-{queue}")
        assert {"queue": queue, "id": task_id, "by": f"on-{queue}"} in event["started"]
        assert await task_ids(env, queue) == [task_id]
    assert await publish(env, status=200, id="half-way") == event


async def test_a_repeat_post_finishes_a_pending_event(env: Env) -> None:
    await three_triggers(env)
    stored = StoredEvent("repeat-me", "user.created", {}, 1_900_000_000_000)
    await env.store.hold(stored.id, stored.accepted_ms + 10_000)
    await env.store.create(stored)
    event = await publish(env, status=200, id="repeat-me")
    assert event["accepted_ms"] == stored.accepted_ms
    assert len(event["started"]) == 3
    assert await env.redis.zrange("jg:events:pending", 0, -1) == []


async def test_events_past_the_retention_are_swept_leaving_nothing(env: Env) -> None:
    kept = await publish(env, id="new")
    for n in range(3):
        old = StoredEvent(f"old-{n}", "user.created", {}, kept["accepted_ms"] - 8 * DAY_MS)
        await env.store.create(old)
        await env.store.index(old)
    events = env.services.events
    assert await events.sweep(kept["accepted_ms"] + 1) == 3
    assert sorted(await env.redis.keys("jg:ev*")) == [
        "jg:ev:new",
        "jg:events",
        "jg:events:n:user.created",
    ]
    assert await env.redis.zrange("jg:events", 0, -1) == ["new"]
    assert await events.sweep(kept["accepted_ms"] + 7 * DAY_MS + 1) == 1
    assert await env.redis.keys("jg:ev*") == []


async def test_recent_events_of_a_name_oldest_first(env: Env) -> None:
    first = await publish(env, id="a", data={"n": 1})
    await publish(env, id="b", data={"n": 2})
    await env.api.post("/v1/events", json={"name": "other", "id": "c"})
    found = await env.services.events.since("user.created", first["accepted_ms"])
    assert [(e.id, e.data) for e in found] == [("a", {"n": 1}), ("b", {"n": 2})]
    assert await env.services.events.since("user.created", first["accepted_ms"] + 60_000) == []


async def test_recent_events_are_read_in_pages_of_100(env: Env) -> None:
    """The page a wait's post-check reads (docs/durable.md: the lookback considers the 100
    oldest events of its name in its window; later ones are read page after page)."""
    first = await publish(env, id="e-000", data={"n": 0})
    for n in range(1, 130):
        await publish(env, id=f"e-{n:03}", data={"n": n})
    events = env.services.events
    page = await events.since("user.created", first["accepted_ms"])
    assert [e.id for e in page] == [f"e-{n:03}" for n in range(100)]
    rest = await events.since("user.created", first["accepted_ms"], offset=100)
    assert [e.id for e in rest] == [f"e-{n:03}" for n in range(100, 130)]
    assert await events.since("user.created", first["accepted_ms"], offset=130) == []


async def test_publishing_takes_an_events_scope_matching_the_name(env: Env) -> None:
    billing = env.as_key(BILLING)
    r = await env.api.post("/v1/events", json={"name": "billing.paid"}, headers=billing)
    assert r.status_code == 201, r.text
    r = await env.api.post("/v1/events", json={"name": "user.created"}, headers=billing)
    assert "event 'user.created'" in problem(r, 403)["detail"]
    problem(await env.api.get("/v1/events", headers=billing), 403)
    reader = env.as_key(READER)
    problem(await env.api.post("/v1/events", json={"name": "billing.paid"}, headers=reader), 403)
    assert (await env.api.get("/v1/events", headers=reader)).status_code == 200
    problem(
        await env.api.put(
            "/v1/triggers/t", json={"event": "x", "queue": "mail", "task": "t"}, headers=reader
        ),
        403,
    )
    with pytest.raises(ValidationError, match="events:"):
        ApiKey(key=BILLING, scopes=["events:"])


async def test_triggers_are_defined_read_and_deleted(env: Env) -> None:
    body = {"event": "user.created", "queue": "nowhere", "task": "welcome"}
    problem(await env.api.put("/v1/triggers/t1", json=body), 404)
    made = await trigger(env, "t1", "mail", filter={"plan": "pro"})
    assert made["filter"] == {"plan": "pro"}
    r = await env.api.put("/v1/triggers/t1", json={**body, "queue": "crm"})
    assert r.status_code == 200
    assert r.json()["queue"] == "crm"
    assert r.json()["created_at"] == made["created_at"]
    assert [t["id"] for t in (await env.api.get("/v1/triggers")).json()["items"]] == ["t1"]
    assert (await env.api.get("/v1/triggers/t1")).json()["queue"] == "crm"
    assert (await env.api.delete("/v1/triggers/t1")).status_code == 204
    problem(await env.api.get("/v1/triggers/t1"), 404)
    problem(await env.api.delete("/v1/triggers/t1"), 404)
    problem(await env.api.get("/v1/events/nope"), 404)
    assert (await publish(env))["started"] == []


async def test_the_sdk_defines_triggers_and_sends_events(env: Env) -> None:
    @task(queue="mail", name="send_welcome")
    def send_welcome(event: dict[str, Any]) -> str:
        return str(event["data"]["user"])

    url = str(env.api.base_url)
    async with AsyncClient(url, ADMIN, transport=env.api._transport) as client:
        made = await client.put_trigger("welcome", event="user.created", task=send_welcome)
        assert (made.queue, made.task) == ("mail", "send_welcome")
        await client.put_trigger(
            "pro", event="user.created", task="upsell", queue="crm", filter={"plan": "pro"}
        )
        assert [t.id for t in (await client.list_triggers()).items] == ["pro", "welcome"]
        event = await client.send_event("user.created", {"user": 5, "plan": "pro"}, id="u5")
        assert sorted(t.by for t in event.started) == ["pro", "welcome"]
        again = await client.send_event("user.created", {"user": 6}, id="u5")
        assert again == event
        assert (await client.get_event("u5")) == event
        assert [e.id for e in (await client.list_events("user.created")).items] == ["u5"]
        (welcome,) = [t for t in event.started if t.by == "welcome"]
        task_record = await client.get_task(welcome.id)
        await client.delete_trigger("pro")
        assert (await client.get_trigger("welcome")).task == "send_welcome"
    # The worker's side: the payload is the function's keyword argument 'event'.
    call = TaskArgs.model_validate(task_record.payload)
    assert send_welcome(*call.args, **call.kwargs) == "5"


def test_the_blocking_client_sends_an_event() -> None:
    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        event = {"id": "e1", "name": "n", "accepted_ms": 0, "accepted_at": "1970-01-01T00:00:00Z"}
        return httpx.Response(201, json=event)

    with Client("http://gateway", ADMIN, transport=httpx.MockTransport(answer)) as client:
        assert client.send_event("n", {"a": 1}, id="e1").id == "e1"
    assert sent[0].url.path == "/v1/events"
    assert json.loads(sent[0].content) == {"name": "n", "data": {"a": 1}, "id": "e1"}


async def test_a_trigger_whose_task_is_refused_starts_nothing_and_the_event_is_done(
    env: Env,
) -> None:
    await three_triggers(env)
    assert (await env.api.delete("/v1/queues/audit")).status_code == 204
    event = await publish(env, id="after-delete")
    assert event["state"] == "done"
    assert sorted(t["by"] for t in event["started"]) == ["on-crm", "on-mail"]
    assert await env.redis.zrange("jg:events:pending", 0, -1) == []
