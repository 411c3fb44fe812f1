"""Batch pushes: one signed POST of several tasks, answered 200 with one result per task."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest

from sdk import AsyncContext, Fail, Retry, task
from sdk.wire import ErrorIn
from tests.sdk.fakes import (
    OTHER_SECRET,
    FakeGateway,
    MakeWorker,
    Serve,
    batch_answer,
    batch_headers,
)

ran: list[str] = []


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


@task("default", name="add")
def add(x: int, y: int = 1) -> int:
    ran.append("add")
    return x + y


@task("default", name="give_up")
async def give_up() -> None:
    ran.append("give_up")
    raise Fail("no such user")


@task("default", name="retry_later")
def retry_later() -> None:
    raise Retry(delay=7.5, message="upstream busy")


@task("default", name="crash")
async def crash() -> None:
    raise KeyError("missing")


async def test_each_task_gets_the_status_a_single_push_would(
    make_worker: MakeWorker, serve: Serve, gateway: FakeGateway
) -> None:
    release = asyncio.Event()

    @task("default", name="long")
    async def long(n: int) -> int:
        await release.wait()
        return n * 2

    worker = make_worker([add, give_up, long], inline_window=0.5, heartbeat_interval=0.01)
    async with serve(worker) as push:
        items = [
            push.item("add", {"args": [41]}),
            push.item("give_up"),
            push.item("long", {"args": [21]}),
        ]
        response = await push.batch(*items)
        results = batch_answer(response).results
        assert worker.running == 1  # the long task runs on in the background
        await gateway.wait_for("heartbeat")
        release.set()
        [result] = await gateway.wait_for("result")
    assert [(r.id, r.status) for r in results] == [
        (items[0]["id"], 200),
        (items[1]["id"], 422),
        (items[2]["id"], 202),
    ]
    assert results[0].result == 42
    assert results[1].error == ErrorIn(error="no such user", retryable=False)
    assert [r.task_failure for r in results] == [False, True, False]
    assert results[2].result is None
    assert results[2].error is None
    # every call under its own task's lease; only the long task called back with more than a
    # heartbeat (a task answered inline may heartbeat while it runs, on a loaded machine)
    leases = {item["id"]: item["lease"] for item in items}
    assert all(call.lease == leases[call.task_id] for call in gateway.calls)
    assert {call.task_id for call in gateway.calls if call.kind != "heartbeat"} == {items[2]["id"]}
    assert result.body == {"result": 42}
    assert worker.running == 0


async def test_retry_and_exceptions_answer_500_with_error_and_retry_after(
    make_worker: MakeWorker, serve: Serve
) -> None:
    async with serve(make_worker([retry_later, crash])) as push:
        response = await push.batch(push.item("retry_later"), push.item("crash"))
    retried, crashed = batch_answer(response).results
    assert (retried.status, retried.retry_after) == (500, 7.5)
    assert retried.error == ErrorIn(error="upstream busy", retryable=True, retry_delay=7.5)
    assert (crashed.status, crashed.retry_after) == (500, None)
    assert (retried.task_failure, crashed.task_failure) == (True, True)
    assert crashed.error is not None
    assert crashed.error.error == "KeyError: 'missing'"
    assert "in crash" in (crashed.error.traceback or "")


async def test_tasks_of_a_batch_run_concurrently(make_worker: MakeWorker, serve: Serve) -> None:
    threads = threading.Barrier(2, timeout=5)
    coroutines = asyncio.Barrier(2)

    @task("default", name="meet_in_thread")
    def meet_in_thread() -> int:
        return threads.wait()  # raises BrokenBarrierError unless both run at once

    @task("default", name="meet_in_loop")
    async def meet_in_loop() -> str:
        async with asyncio.timeout(5):
            await coroutines.wait()
        return "met"

    worker = make_worker([meet_in_thread, meet_in_loop], inline_window=10)
    async with serve(worker) as push:
        response = await push.batch(
            push.item("meet_in_thread"),
            push.item("meet_in_loop"),
            push.item("meet_in_thread"),
            push.item("meet_in_loop"),
        )
    results = batch_answer(response).results
    assert [r.status for r in results] == [200, 200, 200, 200]
    assert [results[0].result, results[2].result] in ([0, 1], [1, 0])  # barrier arrival order
    assert [results[1].result, results[3].result] == ["met", "met"]


async def test_unknown_task_or_bad_payload_refuses_that_task_only(
    make_worker: MakeWorker, serve: Serve
) -> None:
    async with serve(make_worker([add])) as push:
        response = await push.batch(
            push.item("no.such.task"),
            push.item("add", {"args": [1]}),
            push.item("add", {"args": "not a list"}),
            push.item("add", {"args": [1, 2, 3]}),
        )
    unknown, done, bad_payload, bad_arguments = batch_answer(response).results
    assert done.status == 200
    assert done.result == 2
    assert ran == ["add"]
    assert unknown.status == 404
    assert unknown.error is not None
    assert unknown.error.retryable is False
    assert "'no.such.task'" in unknown.error.error
    for refused in (bad_payload, bad_arguments):
        assert refused.status == 422
        assert refused.error is not None
        assert refused.error.retryable is False
    assert bad_payload.error is not None
    assert "payload.args" in bad_payload.error.error


async def test_bad_signature_is_401_and_nothing_runs(
    make_worker: MakeWorker, serve: Serve, gateway: FakeGateway
) -> None:
    async with serve(make_worker([add, give_up])) as push:
        items = [push.item("add", {"args": [1]}), push.item("give_up")]
        wrong_secret = await push.batch(*items, secret=OTHER_SECRET)
        content = json.dumps({"tasks": items}).encode()
        headers = batch_headers(content, 2)
        tampered = await push.send(content.replace(b"[1]", b"[9]"), headers)
    for response in (wrong_secret, tampered):
        assert response.status_code == 401
        assert response.json()["title"] == "Invalid signature"
    assert ran == []
    assert gateway.calls == []


async def test_tasks_beyond_max_concurrency_are_busy(
    make_worker: MakeWorker, serve: Serve, gateway: FakeGateway
) -> None:
    release = asyncio.Event()

    @task("default", name="hog")
    async def hog() -> None:
        await release.wait()

    worker = make_worker([hog], inline_window=0, heartbeat_interval=60, max_concurrency=2)
    async with serve(worker) as push:
        # an unknown task takes no slot: the two first hogs run, the third is busy
        response = await push.batch(
            push.item("unknown"), push.item("hog"), push.item("hog"), push.item("hog")
        )
        assert worker.running == 2
        release.set()
        await gateway.wait_for("result", count=2)
    unknown, first, second, third = batch_answer(response).results
    assert [unknown.status, first.status, second.status, third.status] == [404, 202, 202, 503]
    assert third.retry_after == 1.0
    assert third.error is not None
    assert third.error.retryable is True
    assert {call.task_id for call in gateway.of("result")} == {first.id, second.id}


async def test_a_worker_shutting_down_answers_busy(make_worker: MakeWorker, serve: Serve) -> None:
    worker = make_worker([add])
    async with serve(worker) as push:
        await worker.shutdown()
        response = await push.batch(push.item("add", {"args": [1]}))
        single = await push("add", {"args": [1]})
    [result] = batch_answer(response).results
    assert (result.status, result.retry_after) == (503, 1.0)
    assert (single.status_code, single.headers["retry-after"]) == (503, "1")
    assert ran == []


async def test_lease_lost_inline_is_409(
    make_worker: MakeWorker, serve: Serve, gateway: FakeGateway
) -> None:
    @task("default", name="beats")
    async def beats(ctx: AsyncContext) -> str:
        await ctx.heartbeat()
        return "not reached"

    gateway.status["heartbeat"] = 409
    async with serve(make_worker([beats])) as push:
        response = await push.batch(push.item("beats"))
    [result] = batch_answer(response).results
    assert result.status == 409
    assert result.error is not None
    assert result.error.error.startswith("Lease lost")
    assert gateway.kinds() == ["heartbeat"]


async def test_a_body_that_is_not_a_batch_is_400_and_nothing_runs(
    make_worker: MakeWorker, serve: Serve
) -> None:
    async def send(body: Any, count: int | str = 1) -> Any:
        content = json.dumps(body).encode()
        headers = batch_headers(content, 0)
        headers["jobgate-batch"] = str(count)
        return await push.send(content, headers)

    async with serve(make_worker([add])) as push:
        no_lease = push.item("add", {"args": [1]})
        del no_lease["lease"]
        answers = {
            "missing lease": await send({"tasks": [no_lease]}),
            "single body": await send(push.body("add", {"args": [1]})),
            "not json": await push.send(b"{", batch_headers(b"{", 1)),
            "wrong count": await send({"tasks": [push.item("add", {"args": [1]})]}, 2),
            "bad count": await send({"tasks": [push.item("add", {"args": [1]})]}, "one"),
        }
    for what, response in answers.items():
        assert response.status_code == 400, what
        assert response.headers["content-type"] == "application/problem+json", what
    assert [e["field"] for e in answers["missing lease"].json()["errors"]] == ["tasks.0.lease"]
    assert ran == []


async def test_single_and_batch_pushes_to_one_worker(
    make_worker: MakeWorker, serve: Serve, gateway: FakeGateway
) -> None:
    async with serve(make_worker([add, give_up])) as push:
        single = await push("add", {"args": [1], "kwargs": {"y": 2}})
        failed = await push("give_up")
        batch = await push.batch(push.item("add", {"args": [5]}))
        missing_lease = push.body("add", {"args": [1]})
        content = json.dumps(missing_lease).encode()
        headers = push.headers(missing_lease["id"], content)
        del headers["jobgate-lease"]
        no_lease = await push.send(content, headers)
    assert (single.status_code, single.json()) == (200, 3)
    assert (failed.status_code, failed.json()) == (
        422,
        {"error": "no such user", "retryable": False},
    )
    assert [(r.status, r.result) for r in batch_answer(batch).results] == [(200, 6)]
    assert no_lease.status_code == 400
    assert gateway.calls == []
