"""The worker's answers to pushes: checks, and tasks that end within the inline window."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

from sdk import AsyncContext, Context, Fail, Retry, TaskFunction, Worker, task
from sdk.wire import HEADER_TASK_FAILURE, PROBLEM_CONTENT_TYPE, ErrorIn, Problem
from tests.sdk.fakes import (
    OTHER_SECRET,
    FakeGateway,
    MakeWorker,
    Pusher,
    Serve,
    push_body,
    signed_headers,
)

ran: list[str] = []


@task("default", name="add")
def add(x: int, y: int = 1) -> int:
    ran.append("add")
    return x + y


@task("default", name="greet")
async def greet(who: str) -> dict[str, str]:
    return {"greeting": f"hello {who}"}


@task("default", name="retry_later")
def retry_later() -> None:
    raise Retry(delay=7.5, message="upstream busy")


@task("default", name="give_up")
async def give_up() -> None:
    raise Fail("no such user")


@task("default", name="crash")
def crash() -> None:
    raise KeyError("missing")


@task("default", name="resume")
def resume(ctx: Context) -> Any:
    return {"seen": ctx.previous_checkpoint, "attempt": ctx.attempt, "id": ctx.id}


@task("default", name="aresume")
async def aresume(ctx: AsyncContext, extra: int) -> Any:
    return [ctx.previous_checkpoint, extra]


@task("default", name="unjsonable")
def unjsonable() -> object:
    return object()


@task("default", name="not_a_number")
def not_a_number() -> object:
    return {"ratio": float("nan"), "top": [float("inf")]}


TASKS: list[TaskFunction[Any, Any]] = [
    add,
    greet,
    retry_later,
    give_up,
    crash,
    resume,
    aresume,
    unjsonable,
    not_a_number,
]


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


def problem_of(response: Any) -> Problem:
    assert response.headers["content-type"] == PROBLEM_CONTENT_TYPE
    return Problem.model_validate_json(response.content)


async def test_sync_task_answers_its_result_inline(
    make_worker: MakeWorker, serve: Serve, gateway: FakeGateway
) -> None:
    async with serve(make_worker(TASKS)) as push:
        response = await push("add", {"args": [2], "kwargs": {"y": 40}})
    assert response.status_code == 200
    assert response.json() == 42
    assert gateway.calls == []  # inline: no callbacks


async def test_async_task_answers_inline_and_null_payload_means_no_arguments(
    make_worker: MakeWorker, serve: Serve
) -> None:
    @task("default", name="nothing")
    async def nothing() -> None:
        return None

    async with serve(make_worker([*TASKS, nothing])) as push:
        greeted = await push("greet", {"args": ["ada"]})
        empty = await push("nothing", None)
    assert (greeted.status_code, greeted.json()) == (200, {"greeting": "hello ada"})
    assert (empty.status_code, empty.json()) == (200, None)


async def test_an_inline_task_starts_before_the_runner_sets_up_its_wait(
    make_worker: MakeWorker, serve: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runner yields once the push's tasks are started: each function's first step runs
    ahead of the inline window's ``asyncio.wait`` and its set-up; a function that ended in
    that step is answered without any wait."""
    events: list[str] = []

    @task("default", name="first")
    async def first() -> None:
        events.append("task")
        await asyncio.sleep(0.01)

    @task("default", name="at_once")
    async def at_once() -> int:
        events.append("at once")
        return 7

    wait = asyncio.wait

    async def recorded(fs: Any, **options: Any) -> Any:
        events.append("wait")
        return await wait(fs, **options)

    monkeypatch.setattr(asyncio, "wait", recorded)
    async with serve(make_worker([first, at_once])) as push:
        awaited = await push("first")
        assert events == ["task", "wait"]
        events.clear()
        answered = await push("at_once")
        assert events == ["at once"]  # settled before the runner looked: no wait
    assert (awaited.status_code, answered.status_code, answered.json()) == (200, 200, 7)


async def test_retry_answers_500_with_retry_after(make_worker: MakeWorker, serve: Serve) -> None:
    async with serve(make_worker(TASKS)) as push:
        response = await push("retry_later")
    assert response.status_code == 500
    assert response.headers["retry-after"] == "8"
    assert response.headers[HEADER_TASK_FAILURE] == "1"  # the task's failure, not the worker's
    error = ErrorIn.model_validate_json(response.content)
    assert error == ErrorIn(error="upstream busy", retryable=True, retry_delay=7.5)


async def test_fail_answers_422_not_retryable(make_worker: MakeWorker, serve: Serve) -> None:
    async with serve(make_worker(TASKS)) as push:
        response = await push("give_up")
    assert response.status_code == 422
    assert response.json() == {"error": "no such user", "retryable": False}
    assert response.headers[HEADER_TASK_FAILURE] == "1"


async def test_exception_answers_500_with_traceback(make_worker: MakeWorker, serve: Serve) -> None:
    async with serve(make_worker(TASKS)) as push:
        response = await push("crash")
    assert response.status_code == 500
    assert response.headers[HEADER_TASK_FAILURE] == "1"
    error = ErrorIn.model_validate_json(response.content)
    assert error.error == "KeyError: 'missing'"
    assert error.retryable is True
    assert error.traceback is not None
    assert "in crash" in error.traceback


async def test_unserialisable_result_fails_without_retry(
    make_worker: MakeWorker, serve: Serve
) -> None:
    async with serve(make_worker(TASKS)) as push:
        response = await push("unjsonable")
    assert response.status_code == 422
    assert response.json()["retryable"] is False
    assert "not JSON-serialisable" in response.json()["error"]
    assert response.headers[HEADER_TASK_FAILURE] == "1"


async def test_nan_or_infinity_in_a_result_fails_without_retry(
    make_worker: MakeWorker, serve: Serve
) -> None:
    async with serve(make_worker(TASKS)) as push:
        response = await push("not_a_number")
    assert response.status_code == 422
    assert response.json()["retryable"] is False
    assert "finite number" in response.json()["error"]


async def test_previous_checkpoint_reaches_the_context(
    make_worker: MakeWorker, serve: Serve
) -> None:
    async with serve(make_worker(TASKS)) as push:
        sync = await push("resume", checkpoint={"page": 3}, attempt=2)
        asynchronous = await push("aresume", {"kwargs": {"extra": 5}}, checkpoint=[1, 2])
    assert sync.status_code == 200
    assert sync.json()["seen"] == {"page": 3}
    assert sync.json()["attempt"] == 2
    assert asynchronous.json() == [[1, 2], 5]


async def test_bad_signature_is_401_and_the_task_never_runs(
    make_worker: MakeWorker, serve: Serve
) -> None:
    async with serve(make_worker(TASKS)) as push:
        response = await push("add", {"args": [1]}, secret=OTHER_SECRET)
        body = push.body("add", {"args": [1]})
        content = json.dumps(body).encode()
        unsigned = push.headers(body["id"], content)
        del unsigned["webhook-signature"]
        missing = await push.send(content, unsigned)
        tampered_headers = push.headers(body["id"], content)
        tampered = await push.send(content.replace(b"[1]", b"[9]"), tampered_headers)
    for answer in (response, missing, tampered):
        assert answer.status_code == 401
        assert problem_of(answer).title == "Invalid signature"
    assert ran == []


async def test_any_of_several_secrets_verifies(gateway: FakeGateway, serve: Serve) -> None:
    worker = Worker(tasks=TASKS, secret=[OTHER_SECRET, "whsec_" + "c2VjcmV0" * 4])
    async with serve(worker) as push:
        response = await push("add", {"args": [1]}, secret=OTHER_SECRET)
    assert response.status_code == 200


async def test_unknown_task_is_404(make_worker: MakeWorker, serve: Serve) -> None:
    async with serve(make_worker(TASKS)) as push:
        response = await push("no.such.task")
    assert response.status_code == 404
    assert "no.such.task" in (problem_of(response).detail or "")
    assert HEADER_TASK_FAILURE not in response.headers  # a refusal: the task never ran


@pytest.mark.parametrize(
    "payload",
    [
        "just a string",
        {"args": "not a list"},
        {"args": [], "kwargs": {}, "extra": 1},
        {"args": [1, 2, 3]},  # too many for add(x, y)
        {"kwargs": {"z": 1}},  # no such parameter
    ],
)
async def test_payload_not_fitting_the_function_is_422(
    make_worker: MakeWorker, serve: Serve, payload: Any
) -> None:
    async with serve(make_worker(TASKS)) as push:
        response = await push("add", payload)
    assert response.status_code == 422
    assert problem_of(response).status == 422
    assert ran == []


async def test_malformed_push_is_400(make_worker: MakeWorker, serve: Serve) -> None:
    async with serve(make_worker(TASKS)) as push:
        body = push.body("add")
        del body["lease_expires_at"]
        content = json.dumps(body).encode()
        bad_body = await push.send(content, push.headers(body["id"], content))
        good = json.dumps(push.body("add", {"args": [1]})).encode()
        headers = push.headers(json.loads(good)["id"], good)
        del headers["jobgate-lease"]
        no_lease = await push.send(good, headers)
    assert bad_body.status_code == 400
    assert [e.field for e in problem_of(bad_body).errors or []] == ["lease_expires_at"]
    assert no_lease.status_code == 400
    assert ran == []


async def test_get_lists_the_tasks(make_worker: MakeWorker, serve: Serve) -> None:
    async with serve(make_worker([add, greet])) as push:
        response = await push.http.get("/")
    assert response.json() == {"tasks": ["add", "greet"]}


def test_two_tasks_with_one_name_are_refused() -> None:
    with pytest.raises(ValueError, match="add"):
        Worker(tasks=[add, add], secret=OTHER_SECRET)


def test_a_bad_secret_is_refused_at_startup() -> None:
    with pytest.raises(ValueError, match="signing secret"):
        Worker(tasks=[add], secret="whsec_!!!")


async def test_worker_mounted_in_another_app_with_its_lifespan() -> None:
    worker = Worker(tasks=TASKS, secret=OTHER_SECRET)
    host = Starlette(routes=[Mount("/jobs", app=worker)], lifespan=worker.lifespan)
    transport = httpx.ASGITransport(app=host)
    async with (
        host.router.lifespan_context(host),
        httpx.AsyncClient(transport=transport, base_url="http://host.test") as http,
    ):
        push = Pusher(http, path="/jobs/")
        response = await push("add", {"args": [4]}, secret=OTHER_SECRET)
    assert (response.status_code, response.json()) == (200, 5)


async def call_raw(
    worker: Worker, messages: list[dict[str, Any]], headers: dict[str, str], method: str = "POST"
) -> list[dict[str, Any]]:
    """Call the worker as an ASGI server would, with ``messages`` as what ``receive`` gives;
    returns what it sent."""
    sent: list[dict[str, Any]] = []
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": "/",
        "raw_path": b"/",
        "root_path": "",
        "query_string": b"",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        "server": ("worker.test", 80),
        "client": ("127.0.0.1", 1234),
    }
    queue = list(messages)

    async def receive() -> dict[str, Any]:
        return queue.pop(0)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async with worker.lifespan():
        await worker(scope, receive, send)
    return sent


async def test_a_push_body_in_several_chunks_is_read_whole() -> None:
    worker = Worker(tasks=TASKS, secret=OTHER_SECRET)
    body = push_body("add", {"args": [20, 22]})
    content = json.dumps(body).encode()
    headers = signed_headers(body["id"], content, OTHER_SECRET)
    chunks = [content[:10], content[10:30], content[30:]]
    messages = [
        {"type": "http.request", "body": chunk, "more_body": i < len(chunks) - 1}
        for i, chunk in enumerate(chunks)
    ]
    sent = await call_raw(worker, messages, headers)
    assert sent[0]["status"] == 200
    assert json.loads(sent[1]["body"]) == 42


async def test_a_push_whose_sender_goes_away_mid_body_runs_nothing_and_is_not_answered() -> None:
    worker = Worker(tasks=TASKS, secret=OTHER_SECRET)
    body = push_body("add", {"args": [1]})
    content = json.dumps(body).encode()
    messages = [
        {"type": "http.request", "body": content[:10], "more_body": True},
        {"type": "http.disconnect"},
    ]
    sent = await call_raw(worker, messages, signed_headers(body["id"], content, OTHER_SECRET))
    assert sent == []
    assert ran == []


async def test_a_method_other_than_post_or_get_is_405(
    make_worker: MakeWorker, serve: Serve
) -> None:
    async with serve(make_worker(TASKS)) as push:
        response = await push.http.put("/", content=b"{}")
    assert response.status_code == 405
