"""``@task``: direct calls, enqueue payloads, handles, and which client is used."""

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
    AsyncClient,
    AsyncContext,
    AsyncTaskHandle,
    Client,
    Context,
    JobgateError,
    Task,
    TaskFailed,
    TaskHandle,
    TaskState,
    TaskTimeout,
    task,
)
from sdk.blocking import HttpxBlockingSession
from sdk.wire import Throttle

URL = "http://gateway.test"
TASK_ID = "01J00000000000000000000002"
NOW = datetime(2030, 1, 1, tzinfo=UTC).isoformat()


def task_json(state: str = "queued", **fields: Any) -> dict[str, Any]:
    record = {
        "id": TASK_ID,
        "queue": "math",
        "name": "add",
        "state": state,
        "max_attempts": 5,
        "created_at": NOW,
        "run_at": NOW,
    }
    return record | fields


@pytest.fixture
def gw() -> Iterator[respx.MockRouter]:
    with respx.mock(base_url=URL, assert_all_called=False) as router:
        router.post("/v1/queues/math/tasks", name="enqueue").respond(201, json=task_json())
        yield router


@pytest.fixture
def client() -> Iterator[Client]:
    with Client(URL, "key", transport=httpx.HTTPTransport()) as client:
        yield client


def make_add(client: Client | None = None) -> Any:
    @task("math", name="add", client=client, priority=3)
    def add(x: int, y: int = 0) -> int:
        return x + y

    return add


def sent(router: respx.MockRouter) -> Any:
    """The last enqueue's body, without an empty ``depends_on`` (the default, sent or not)."""
    body = json.loads(router.routes["enqueue"].calls.last.request.content)
    if body.get("depends_on") == []:
        del body["depends_on"]
    return body


def answer_polls(router: respx.MockRouter, *states: dict[str, Any]) -> respx.Route:
    answers = iter(states)
    return router.get(f"/v1/tasks/{TASK_ID}").mock(
        side_effect=lambda request: httpx.Response(200, json=next(answers))
    )


def test_calling_a_task_function_runs_it_here() -> None:
    add = make_add()
    assert add(2, y=3) == 5
    assert add.name == "add"
    assert add.queue == "math"


def test_a_context_parameter_gets_a_detached_context_when_called_directly() -> None:
    @task("math")
    def needs_ctx(ctx: Context, x: int) -> list[Any]:
        ctx.heartbeat(0.5)
        ctx.checkpoint({"x": x})
        ctx.log("hello")
        return [ctx.attempt, ctx.previous_checkpoint, ctx.cancelled]

    assert needs_ctx(7) == [1, None, False]


async def test_an_async_task_called_directly_is_awaited() -> None:
    @task("math")
    async def double(ctx: AsyncContext, x: int) -> int:
        await ctx.heartbeat()
        return 2 * x

    assert await double(4) == 8


def test_name_defaults_to_module_and_qualname() -> None:
    @task("math")
    def local() -> None:
        return None

    assert local.name == f"{__name__}.test_name_defaults_to_module_and_qualname.local"


@pytest.mark.parametrize("value", [float("nan"), float("inf"), [float("-inf")]])
def test_nan_and_infinity_are_refused_before_sending(
    gw: respx.MockRouter, client: Client, value: object
) -> None:
    add = make_add(client)
    with pytest.raises(ValueError, match="finite number"):
        add.delay(value)
    with pytest.raises(ValueError, match="finite number"):
        client.enqueue("math", "add", payload={"x": value})
    assert not gw.routes["enqueue"].called


def test_delay_enqueues_args_and_kwargs(gw: respx.MockRouter, client: Client) -> None:
    add = make_add(client)
    handle = add.delay(1, y=2)
    assert isinstance(handle, TaskHandle)
    assert handle.id == TASK_ID
    assert sent(gw) == {"name": "add", "payload": {"args": [1], "kwargs": {"y": 2}}, "priority": 3}


def test_delay_asks_for_a_receipt_and_the_handle_fetches_the_task_when_read(
    gw: respx.MockRouter, client: Client
) -> None:
    minimal = {"id": TASK_ID, "state": "scheduled", "deduplicated": False}
    applied = {"preference-applied": "return=minimal"}
    gw.routes["enqueue"].respond(201, json=minimal, headers=applied)
    read = gw.get(f"/v1/tasks/{TASK_ID}").respond(200, json=task_json("scheduled", priority=3))
    handle = make_add(client).delay(1)
    assert gw.routes["enqueue"].calls.last.request.headers["prefer"] == "return=minimal"
    assert (handle.id, handle.state, handle.deduplicated) == (TASK_ID, TaskState.SCHEDULED, False)
    assert repr(handle) == f"TaskHandle('{TASK_ID}', state='scheduled')"
    assert not read.called
    assert handle.task.priority == 3  # fetched on first read, then kept
    assert handle.task.priority == 3
    assert read.call_count == 1
    # With wait the answer is the whole Task, held at once.
    gw.routes["enqueue"].respond(201, json=task_json())
    waited = make_add(client).apply([1], wait=1)
    assert "prefer" not in gw.routes["enqueue"].calls.last.request.headers
    assert waited.task.name == "add"


async def test_an_async_handle_of_a_receipt_has_its_task_once_asked_for(
    gw: respx.MockRouter,
) -> None:
    gw.routes["enqueue"].respond(201, json={"id": TASK_ID, "state": "queued"})
    answer_polls(gw, task_json("running"))
    async with AsyncClient(URL, "key", transport=httpx.AsyncHTTPTransport()) as client:
        handle = await make_add().using(client).delay_async(1)
        with pytest.raises(JobgateError, match=r"await handle\.get"):
            handle.task  # noqa: B018
        assert (await handle.get()).state is TaskState.RUNNING
        assert handle.task.state is handle.state is TaskState.RUNNING


def test_apply_sends_options(gw: respx.MockRouter, client: Client) -> None:
    add = make_add(client)
    add.apply((1,), {"y": 2}, delay=10, priority=9, max_attempts=2)
    assert sent(gw) == {
        "name": "add",
        "payload": {"args": [1], "kwargs": {"y": 2}},
        "priority": 9,
        "delay": 10.0,
        "max_attempts": 2,
    }
    run_at = datetime(2031, 5, 1, 12, tzinfo=UTC)
    add.apply([5], run_at=run_at, task_id=TASK_ID)
    body = sent(gw)
    assert body["run_at"] == "2031-05-01T12:00:00Z"
    assert body["id"] == TASK_ID


def test_arguments_are_checked_before_sending(gw: respx.MockRouter, client: Client) -> None:
    add = make_add(client)
    with pytest.raises(TypeError):
        add.apply((1, 2, 3))
    with pytest.raises(ValueError, match="JSON"):
        add.apply((object(),))
    assert not gw.routes["enqueue"].called


def test_create_makes_batch_entries(gw: respx.MockRouter, client: Client) -> None:
    add = make_add(client)
    gw.post("/v1/queues/math/tasks/batch").respond(201, json={"tasks": [task_json()] * 2})
    tasks = client.enqueue_batch(add.queue, [add.create((i,)) for i in range(2)])
    assert len(tasks) == 2


def test_result_returns_the_value(gw: respx.MockRouter, client: Client) -> None:
    route = answer_polls(gw, task_json("running"), task_json("succeeded", result=3))
    handle = make_add(client).delay(1, 2)
    assert handle.result(timeout=30) == 3
    assert route.call_count == 2
    assert route.calls.last.request.url.params["wait"] != "0"


@pytest.mark.parametrize("state", ["failed", "dead", "cancelled"])
def test_result_raises_task_failed(gw: respx.MockRouter, client: Client, state: str) -> None:
    answer_polls(gw, task_json(state, error="ValueError: bad"))
    handle = make_add(client).delay(1)
    with pytest.raises(TaskFailed, match=f"ended {state}: ValueError: bad") as caught:
        handle.result()
    assert caught.value.task.state is TaskState(state)


def test_result_raises_task_timeout(gw: respx.MockRouter, client: Client) -> None:
    answer_polls(gw, task_json("running"))
    handle = make_add(client).delay(1)
    with pytest.raises(TaskTimeout):
        handle.result(timeout=0)


def test_status_get_and_cancel(gw: respx.MockRouter, client: Client) -> None:
    answer_polls(gw, task_json("running"), task_json("running", progress=0.5))
    gw.post(f"/v1/tasks/{TASK_ID}/cancel").respond(200, json=task_json("cancelled"))
    handle = make_add(client).delay(1)
    assert handle.status() is TaskState.RUNNING
    assert handle.get().progress == 0.5
    assert handle.cancel().state is TaskState.CANCELLED


def test_using_binds_a_client(gw: respx.MockRouter, client: Client) -> None:
    add = make_add()
    bound = add.using(client)
    assert bound.client() is client
    bound.delay(1)
    assert gw.routes["enqueue"].called


def test_without_a_client_one_is_made_from_env_once(
    gw: respx.MockRouter, monkeypatch: pytest.MonkeyPatch
) -> None:
    through_httpx(monkeypatch)  # respx intercepts httpx
    monkeypatch.setenv("JOBGATE_URL", URL)
    monkeypatch.setenv("JOBGATE_API_KEY", "env-key")
    add = make_add()
    add.delay(1)
    first = add.client()
    add.delay(2)
    assert add.client() is first
    request = gw.routes["enqueue"].calls.last.request
    assert request.headers["authorization"] == "Bearer env-key"
    first.close()


async def test_async_variants(gw: respx.MockRouter) -> None:
    answer_polls(gw, task_json("succeeded", result={"sum": 3}))
    async with AsyncClient(URL, "key", transport=httpx.AsyncHTTPTransport()) as client:
        add = make_add().using(client)
        handle = await add.delay_async(1, y=2)
        assert isinstance(handle, AsyncTaskHandle)
        assert await handle.result(timeout=5) == {"sum": 3}
        await add.apply_async([4], priority=1)
    assert sent(gw) == {"name": "add", "payload": {"args": [4], "kwargs": {}}, "priority": 1}


def test_invalid_options_fail_at_decoration() -> None:
    with pytest.raises(ValueError, match="queue"):
        task("bad queue name!")
    with pytest.raises(ValueError, match="max_attempts"):

        @task("math", max_attempts=0)
        def never() -> None:
            return None

    with pytest.raises(ValueError, match="name"):
        task("math")(lambda: None)  # "<lambda>" is no task name: pass name=


def test_apply_sends_every_task_option(gw: respx.MockRouter, client: Client) -> None:
    add = make_add(client)
    other = TaskHandle(Task.model_validate(task_json(id="01J00000000000000000000003")), client)
    add.apply(
        (1,),
        dedup_key="add-1",
        singleton_key="adder",
        depends_on=["01j00000000000000000000004", other],
        group="sums",
        after_group="inputs",
        capability="gpu",
        owner="tenant-7",
        version="v2",
        max_heartbeat_interval=15,
        lease_timeout=60,
        max_run_time=600,
    )
    assert sent(gw) == {
        "name": "add",
        "payload": {"args": [1], "kwargs": {}},
        "priority": 3,
        "dedup_key": "add-1",
        "singleton_key": "adder",
        "depends_on": ["01J00000000000000000000004", "01J00000000000000000000003"],
        "group": "sums",
        "after_group": "inputs",
        "capability": "gpu",
        "owner": "tenant-7",
        "version": "v2",
        "max_heartbeat_interval": 15.0,
        "lease_timeout": 60.0,
        "max_run_time": 600.0,
    }


async def test_async_handles_are_dependencies_too(gw: respx.MockRouter) -> None:
    async with AsyncClient(URL, "key", transport=httpx.AsyncHTTPTransport()) as client:
        add = make_add().using(client)
        first = await add.delay_async(1)
        await add.apply_async([2], depends_on=[first], owner="me")
    assert sent(gw)["depends_on"] == [TASK_ID]
    assert sent(gw)["owner"] == "me"


def test_handles_say_when_the_enqueue_was_deduplicated(
    gw: respx.MockRouter, client: Client
) -> None:
    add = make_add(client)
    assert add.delay(1).deduplicated is False
    gw.routes["enqueue"].respond(200, json=task_json(deduplicated=True))
    handle = add.apply([1], dedup_key="once")
    assert handle.deduplicated is True
    answer_polls(gw, task_json("running"))
    handle.get()  # a later read of the record does not forget how the enqueue went
    assert handle.deduplicated is True


def test_debounce_and_throttle_are_sent_and_the_handle_says_how_it_went(
    gw: respx.MockRouter, client: Client
) -> None:
    add = make_add(client)
    flow = {"debounce_key": "user-7", "debounce_seq": 3, "replaced": True}
    gw.routes["enqueue"].respond(200, json=task_json("scheduled", flow=flow))
    handle = add.apply([1], debounce={"key": "user-7", "window": 30})
    assert sent(gw)["debounce"] == {"key": "user-7", "window": 30.0}
    assert (handle.replaced, handle.throttled) == (True, None)
    assert handle.state.value == "scheduled"
    gw.routes["enqueue"].respond(200, json=task_json(flow={"throttled": "dropped"}))
    handle = add.apply([2], throttle=Throttle(key="acct", window=60, limit=5, mode="delay"))
    assert sent(gw)["throttle"] == {"key": "acct", "window": 60.0, "limit": 5, "mode": "delay"}
    assert (handle.replaced, handle.throttled) == (False, "dropped")
    with pytest.raises(ValueError, match="debounce cannot be combined with delay"):
        add.apply([1], delay=5, debounce={"key": "k", "window": 1})


def test_bad_option_values_name_the_field(gw: respx.MockRouter, client: Client) -> None:
    add = make_add(client)
    cases: list[tuple[dict[str, Any], str]] = [
        ({"dedup_key": "has space"}, "dedup_key"),
        ({"depends_on": ["not-a-ulid"]}, "depends_on"),
        ({"group": "bad/name"}, "group"),
        ({"max_heartbeat_interval": 0}, "max_heartbeat_interval"),
    ]
    for options, field in cases:
        with pytest.raises(ValueError, match=field):
            add.apply([1], **options)
    assert not gw.routes["enqueue"].called


def test_decorator_defaults_for_capability_version_and_heartbeats(
    gw: respx.MockRouter, client: Client
) -> None:
    @task(
        "math",
        name="render",
        client=client,
        capability="gpu",
        version="3.1",
        max_heartbeat_interval=30,
    )
    def render(scene: str) -> None:
        return None

    render.delay("intro")
    assert sent(gw) == {
        "name": "render",
        "payload": {"args": ["intro"], "kwargs": {}},
        "priority": 0,
        "capability": "gpu",
        "version": "3.1",
        "max_heartbeat_interval": 30.0,
    }
    render.apply(["intro"], version="3.2")
    assert sent(gw)["version"] == "3.2"


def through_httpx(monkeypatch: pytest.MonkeyPatch) -> None:
    """Clients made from the environment send through httpx (respx mocks httpx)."""
    monkeypatch.setattr(sdk.blocking, "open_blocking_session", HttpxBlockingSession)
