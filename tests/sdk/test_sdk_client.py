"""The producer/admin clients against a mocked gateway (respx)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
import respx

import sdk.blocking
from sdk import (
    ApiError,
    AsyncClient,
    Backoff,
    BackoffStrategy,
    Client,
    JobgateError,
    QueuePolicy,
    Task,
    TaskCreate,
    TaskState,
    TaskTimeout,
    api,
    task,
)
from sdk.blocking import HttpxBlockingSession
from sdk.catalog import catalog
from sdk.client import WORKER_BATCH_SIZE
from sdk.wire import QueuePolicyPatch

URL = "http://gateway.test"
KEY = "jg_secret_key"
TASK_ID = "01J00000000000000000000001"
NOW = datetime(2030, 1, 1, tzinfo=UTC).isoformat()


def task_json(state: str = "queued", **fields: Any) -> dict[str, Any]:
    task = {
        "id": TASK_ID,
        "queue": "emails",
        "name": "send",
        "payload": None,
        "state": state,
        "max_attempts": 5,
        "created_at": NOW,
        "run_at": NOW,
    }
    return task | fields


def queue_json(name: str = "emails") -> dict[str, Any]:
    return {"name": name, "policy": {}, "created_at": NOW, "counts": {"queued": 2}}


@pytest.fixture
def gw() -> Iterator[respx.MockRouter]:
    with respx.mock(base_url=URL, assert_all_called=False) as router:
        yield router


@pytest.fixture
def client() -> Iterator[Client]:
    with Client(URL, KEY, timeout=5.0, transport=httpx.HTTPTransport()) as client:
        yield client


def sent(route: respx.Route) -> Any:
    return json.loads(route.calls.last.request.content)


def test_put_queue_sends_policy_with_fields_and_bearer_key(
    gw: respx.MockRouter, client: Client
) -> None:
    route = gw.put("/v1/queues/emails").respond(201, json=queue_json())
    policy = QueuePolicy(backoff=Backoff(strategy=BackoffStrategy.LINEAR, base_delay=2))
    queue = client.put_queue("emails", policy, max_attempts=3)
    request = route.calls.last.request
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.headers["content-type"] == "application/json"
    body = sent(route)
    assert body["max_attempts"] == 3
    assert body["backoff"] == {"strategy": "linear", "base_delay": 2.0, "max_delay": 300.0}
    assert queue.name == "emails"
    assert queue.counts == {TaskState.QUEUED: 2}


def test_put_queue_validates_fields_before_sending(gw: respx.MockRouter, client: Client) -> None:
    with pytest.raises(ValueError, match="max_attempts"):
        client.put_queue("emails", max_attempts=0)
    assert not gw.calls


def test_patch_queue_sends_only_the_given_fields(gw: respx.MockRouter, client: Client) -> None:
    route = gw.patch("/v1/queues/emails").respond(200, json=queue_json())
    client.patch_queue("emails", paused=True)
    assert sent(route) == {"paused": True}
    client.patch_queue("emails", QueuePolicyPatch(max_attempts=2), paused=False)
    assert sent(route) == {"max_attempts": 2, "paused": False}


def test_queue_and_endpoint_routes(gw: respx.MockRouter, client: Client) -> None:
    gw.get("/v1/queues").respond(200, json={"items": [queue_json("a"), queue_json("b")]})
    gw.get("/v1/queues/a").respond(200, json=queue_json("a"))
    deleted = gw.delete("/v1/queues/a").respond(204)
    endpoint = {
        "id": "ep1",
        "queue": "a",
        "url": "https://worker.test/jobs",
        "concurrency": 4,
        "capabilities": ["gpu"],
        "enabled": True,
        "created_at": NOW,
    }
    added = gw.post("/v1/queues/a/endpoints").respond(201, json=endpoint | {"secret": "whsec_x"})
    gw.get("/v1/queues/a/endpoints").respond(200, json={"items": [endpoint]})
    removed = gw.delete("/v1/queues/a/endpoints/ep1").respond(204)

    assert [q.name for q in client.list_queues()] == ["a", "b"]
    assert client.get_queue("a").name == "a"
    client.delete_queue("a")
    created = client.add_endpoint(
        "a", "https://worker.test/jobs", concurrency=4, capabilities=["gpu"], batch_size=20
    )
    assert created.secret == "whsec_x"
    assert sent(added) == {
        "url": "https://worker.test/jobs",
        "pull": False,
        "concurrency": 4,
        "capabilities": ["gpu"],
        "batch_size": 20,
    }
    assert [e.id for e in client.list_endpoints("a")] == ["ep1"]
    client.delete_endpoint("a", "ep1")
    assert deleted.called
    assert removed.called


@task("images")
def resize(path: str, size: int = 10) -> None: ...


@task("emails")
def send_mail(to: str) -> None: ...


async def test_add_worker_registers_an_sdk_worker_with_its_catalog_and_batches(
    gw: respx.MockRouter, client: Client
) -> None:
    endpoint = {
        "id": "ep1",
        "queue": "images",
        "url": "https://worker.test/",
        "concurrency": 10,
        "capabilities": [],
        "enabled": True,
        "created_at": NOW,
    }
    added = gw.post("/v1/queues/images/endpoints").respond(201, json=endpoint | {"secret": "s"})
    assert client.add_worker("images", "https://worker.test/", [resize, send_mail]).secret == "s"
    body = sent(added)
    assert body["batch_size"] == WORKER_BATCH_SIZE == 32  # a Worker takes batches
    assert (body["url"], body["concurrency"], body["pull"]) == ("https://worker.test/", 10, False)
    assert [t["name"] for t in body["tasks"]] == [resize.name]  # the queue's tasks only
    assert body["tasks"][0]["schema"] == sent_catalog([resize])[0]["schema"]
    client.add_worker("images", "https://worker.test/", [resize], concurrency=4, batch_size=1)
    assert (sent(added)["concurrency"], sent(added)["batch_size"]) == (4, 1)
    async with AsyncClient(URL, KEY, transport=httpx.AsyncHTTPTransport()) as async_client:
        await async_client.add_worker("images", "https://worker.test/", [resize])
    assert sent(added) == body
    # add_endpoint is for any service: one task per push unless told
    client.add_endpoint("images", "https://worker.test/")
    assert sent(added)["batch_size"] == 1


def sent_catalog(tasks: list[Any]) -> list[dict[str, Any]]:
    return [t.model_dump(mode="json") for t in catalog(tasks)]


def test_enqueue_sends_a_task_create(gw: respx.MockRouter, client: Client) -> None:
    route = gw.post("/v1/queues/emails/tasks").respond(201, json=task_json())
    task = client.enqueue("emails", "send", {"to": "ada"}, priority=5, delay=30)
    assert sent(route) == {
        "name": "send",
        "payload": {"to": "ada"},
        "priority": 5,
        "delay": 30.0,
        "depends_on": [],
    }
    assert (task.id, task.state) == (TASK_ID, TaskState.QUEUED)


def test_enqueue_batch_posts_all_tasks(gw: respx.MockRouter, client: Client) -> None:
    route = gw.post("/v1/queues/emails/tasks/batch").respond(
        201, json={"tasks": [task_json(), task_json(), task_json()]}
    )
    batch = [
        TaskCreate(name="a"),
        TaskCreate(name="b", payload=1, priority=0, depends_on=[]),
        TaskCreate(name="c", payload=0, priority=-1, depends_on=[TASK_ID]),
    ]
    tasks = client.enqueue_batch("emails", batch)
    assert len(tasks) == 3
    # Fields at their default are left out, given or not: the gateway reads them as such.
    assert sent(route) == {
        "tasks": [
            {"name": "a"},
            {"name": "b", "payload": 1},
            {"name": "c", "payload": 0, "priority": -1, "depends_on": [TASK_ID]},
        ]
    }


def test_list_tasks_query_and_task_routes(gw: respx.MockRouter, client: Client) -> None:
    listed = gw.get("/v1/queues/emails/tasks").respond(
        200, json={"items": [task_json()], "next_cursor": "c2"}
    )
    cancelled = gw.post(f"/v1/tasks/{TASK_ID}/cancel").respond(200, json=task_json("cancelled"))
    gw.get(f"/v1/tasks/{TASK_ID}/logs").respond(
        200, json={"items": [{"message": "hi", "level": "info", "at": NOW}]}
    )
    page = client.list_tasks("emails", state=TaskState.DEAD, limit=10, cursor="c1")
    assert dict(listed.calls.last.request.url.params) == {
        "state": "dead",
        "limit": "10",
        "cursor": "c1",
    }
    assert page.next_cursor == "c2"
    assert client.cancel(TASK_ID).state is TaskState.CANCELLED
    assert cancelled.called
    assert [line.message for line in client.logs(TASK_ID)] == ["hi"]


def test_problem_json_becomes_api_error_with_fields(gw: respx.MockRouter, client: Client) -> None:
    problem = {
        "type": "about:blank",
        "title": "Validation failed",
        "status": 422,
        "detail": "the task is invalid",
        "errors": [{"field": "tasks.0.name", "reason": "must be 1-200 characters"}],
    }
    gw.post("/v1/queues/emails/tasks/batch").respond(
        422, json=problem, headers={"content-type": "application/problem+json"}
    )
    with pytest.raises(ApiError) as caught:
        client.enqueue_batch("emails", [TaskCreate(name="a")])
    error = caught.value
    assert error.status == 422
    assert error.problem.errors is not None
    assert error.problem.errors[0].field == "tasks.0.name"
    assert str(error) == (
        "422 Validation failed: the task is invalid\n  tasks.0.name: must be 1-200 characters"
    )
    assert isinstance(error, JobgateError)


def test_non_json_error_body_still_becomes_api_error(gw: respx.MockRouter, client: Client) -> None:
    gw.get("/v1/queues/x").respond(502, text="<html>Bad Gateway</html>")
    with pytest.raises(ApiError) as caught:
        client.get_queue("x")
    assert caught.value.status == 502
    assert caught.value.problem.title == "Bad Gateway"
    assert caught.value.problem.detail == "<html>Bad Gateway</html>"


def test_get_task_with_wait_long_polls_and_stretches_the_read_timeout(
    gw: respx.MockRouter, client: Client
) -> None:
    route = gw.get(f"/v1/tasks/{TASK_ID}").respond(200, json=task_json("running"))
    client.get_task(TASK_ID, wait=20)
    request = route.calls.last.request
    assert request.url.params["wait"] == "20"
    assert request.extensions["timeout"]["read"] == pytest.approx(25.0)
    client.get_task(TASK_ID, wait=600)
    assert route.calls.last.request.url.params["wait"] == "60"
    client.get_task(TASK_ID)
    assert "wait" not in route.calls.last.request.url.params


def test_wait_long_polls_until_the_task_finishes(gw: respx.MockRouter, client: Client) -> None:
    answers = iter([task_json("running"), task_json("succeeded", result=[1, 2])])
    route = gw.get(f"/v1/tasks/{TASK_ID}").mock(
        side_effect=lambda request: httpx.Response(200, json=next(answers))
    )
    task = client.wait(TASK_ID, timeout=100)
    assert task.result == [1, 2]
    waits = [float(call.request.url.params["wait"]) for call in route.calls]
    assert len(waits) == 2
    assert waits[0] == 60.0
    assert 39.0 < waits[1] <= 60.0


def test_wait_plan_asks_for_the_remaining_time_and_stops_at_the_deadline() -> None:
    now = [1000.0]
    running = Task.model_validate(task_json("running"))
    waits: list[float] = []

    def serve_polls() -> None:
        """Answer every poll with a running task, holding it for its whole wait."""
        plan = api.wait(TASK_ID, timeout=150, clock=lambda: now[0])
        call = next(plan)
        while True:
            waits.append(call.wait)
            now[0] += call.wait
            call = plan.send(running)

    with pytest.raises(TaskTimeout) as caught:
        serve_polls()
    assert waits == [60.0, 60.0, 30.0]
    assert caught.value.task is not None
    assert caught.value.task.state is TaskState.RUNNING
    assert "not finished after 150s" in str(caught.value)
    assert isinstance(caught.value, TimeoutError)


def test_wait_with_zero_timeout_polls_once(gw: respx.MockRouter, client: Client) -> None:
    route = gw.get(f"/v1/tasks/{TASK_ID}").respond(200, json=task_json("queued"))
    with pytest.raises(TaskTimeout):
        client.wait(TASK_ID, timeout=0)
    assert route.call_count == 1
    assert route.calls.last.request.url.params["wait"] == "0"


def test_from_env(monkeypatch: pytest.MonkeyPatch, gw: respx.MockRouter) -> None:
    through_httpx(monkeypatch)  # respx intercepts httpx
    route = gw.get("/v1/queues").respond(200, json={"items": []})
    monkeypatch.setenv("JOBGATE_URL", URL + "/")
    monkeypatch.setenv("JOBGATE_API_KEY", "from-env")
    with Client.from_env() as client:
        assert client.list_queues() == []
    assert route.calls.last.request.headers["authorization"] == "Bearer from-env"
    monkeypatch.delenv("JOBGATE_URL")
    with pytest.raises(JobgateError, match="JOBGATE_URL"):
        Client.from_env()


def test_without_api_key_no_authorization_header(gw: respx.MockRouter) -> None:
    route = gw.get("/v1/queues").respond(200, json={"items": []})
    with Client(URL, transport=httpx.HTTPTransport()) as client:
        client.list_queues()
    assert "authorization" not in route.calls.last.request.headers


async def test_async_client_shares_the_request_shapes(gw: respx.MockRouter) -> None:
    enqueued = gw.post("/v1/queues/emails/tasks").respond(201, json=task_json())
    answers = iter([task_json("running"), task_json("dead", error="boom")])
    polled = gw.get(f"/v1/tasks/{TASK_ID}").mock(
        side_effect=lambda request: httpx.Response(200, json=next(answers))
    )
    async with AsyncClient(URL, KEY, transport=httpx.AsyncHTTPTransport()) as client:
        task = await client.enqueue("emails", "send", [1])
        finished = await client.wait(task.id, timeout=30)
    assert enqueued.calls.last.request.headers["authorization"] == f"Bearer {KEY}"
    assert sent(enqueued) == {"name": "send", "payload": [1], "priority": 0, "depends_on": []}
    assert finished.state is TaskState.DEAD
    assert polled.call_count == 2


async def test_async_client_raises_api_error(gw: respx.MockRouter) -> None:
    gw.delete("/v1/queues/nope").respond(
        404, json={"title": "Not Found", "status": 404, "detail": "no queue 'nope'"}
    )
    async with AsyncClient(URL, KEY, transport=httpx.AsyncHTTPTransport()) as client:
        with pytest.raises(ApiError, match="no queue 'nope'"):
            await client.delete_queue("nope")


def through_httpx(monkeypatch: pytest.MonkeyPatch) -> None:
    """Clients made from the environment send through httpx (respx mocks httpx)."""
    monkeypatch.setattr(sdk.blocking, "open_blocking_session", HttpxBlockingSession)
