"""A real gateway and a scripted worker over loopback HTTP: the push protocol's answer table,
fencing of callbacks, retries and their backoff delays.

The worker here is a bare Starlette app (not the SDK) so each answer can be scripted exactly.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Route

from sdk.wire import BatchItem, PushBody
from tests.scripted_worker import ADMIN, Rig, Worker
from tests.support import live_gateway, serve, until


@pytest.fixture
async def rig(redis_url: str) -> AsyncIterator[Rig]:
    worker = Worker()
    worker_app = Starlette(routes=[Route("/", worker.handle, methods=["POST"])])
    async with (
        serve(worker_app) as worker_url,
        live_gateway(redis_url, ADMIN) as (gateway_url, api),
    ):
        rig = Rig(api, worker, gateway_url)
        await rig.queue("q", backoff={"strategy": "constant", "base_delay": 0.1, "max_delay": 1})
        r = await api.post("/v1/queues/q/endpoints", json={"url": worker_url + "/"})
        assert r.status_code == 201, r.text
        worker.secret = r.json()["secret"]
        yield rig


async def test_inline_success_signed_push_with_headers(rig: Rig) -> None:
    task_id = await rig.enqueue("hello", {"args": ["world"]})
    task = await rig.finished(task_id)
    assert task["state"] == "succeeded"
    assert task["result"] == {"echo": {"args": ["world"]}}
    ((headers, push),) = rig.worker.pushes(task_id)
    assert headers["webhook-id"] == task_id
    assert headers["jobgate-attempt"] == "1"
    assert headers["jobgate-callback"] == f"{rig.gateway_url}/v1/callbacks/q/{task_id}"
    assert "traceparent" not in headers  # tracing off and no context given: none is made up
    assert push.attempt == 1
    assert [a["outcome"] for a in task["attempts"]] == ["succeeded"]
    assert task["attempts"][0]["http_status"] == 200


async def test_push_passes_on_the_producers_trace_context_when_tracing_is_off(rig: Rig) -> None:
    header = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    field = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    r = await rig.api.post(
        "/v1/queues/q/tasks",
        json={"name": "hello", "payload": None},
        headers={"traceparent": header, "tracestate": "vendor=1"},
    )
    from_header = r.json()["id"]
    from_field = await rig.enqueue("hello", None, traceparent=field, tracestate="other=2")
    r = await rig.api.post(
        "/v1/queues/q/tasks", json={"name": "hello"}, headers={"traceparent": "garbage"}
    )
    malformed = r.json()["id"]
    for task_id in (from_header, from_field, malformed):
        await rig.finished(task_id)
    ((headers, _),) = rig.worker.pushes(from_header)
    assert (headers["traceparent"], headers["tracestate"]) == (header, "vendor=1")
    ((headers, _),) = rig.worker.pushes(from_field)
    assert (headers["traceparent"], headers["tracestate"]) == (field, "other=2")
    ((headers, _),) = rig.worker.pushes(malformed)
    assert "traceparent" not in headers
    assert (await rig.task(from_header))["trace_id"] == "0af7651916cd43dd8448eb211c80319c"
    assert (await rig.task(malformed))["trace_id"] is None


async def test_accepted_then_callbacks_and_stale_lease_is_refused(rig: Rig) -> None:
    rig.worker.script["long"] = (202, None)
    task_id = await rig.enqueue("long")
    await until(lambda: rig.worker.pushes(task_id), what="push")
    ((headers, _),) = rig.worker.pushes(task_id)
    base, lease = headers["jobgate-callback"], headers["jobgate-lease"]
    async with httpx.AsyncClient() as cb:
        hb = await cb.post(
            f"{base}/heartbeat", json={"progress": 0.5}, headers={"jobgate-lease": lease}
        )
        assert hb.status_code == 200, hb.text
        assert hb.json()["cancel_requested"] is False
        bad = await cb.post(f"{base}/result", json={"result": 1}, headers={"jobgate-lease": "nope"})
        assert bad.status_code == 409
        assert bad.headers["content-type"] == "application/problem+json"
        missing = await cb.post(f"{base}/result", json={"result": 1})
        assert missing.status_code == 401
        log = await cb.post(
            f"{base}/logs",
            json={"lines": [{"message": "half way"}]},
            headers={"jobgate-lease": lease},
        )
        assert log.status_code == 200, log.text
        assert (await rig.task(task_id))["progress"] == 0.5
        ok = await cb.post(
            f"{base}/result", json={"result": {"n": 42}}, headers={"jobgate-lease": lease}
        )
        assert ok.status_code == 200
        assert ok.json() == {"state": "succeeded"}
        late = await cb.post(
            f"{base}/error", json={"error": "zombie"}, headers={"jobgate-lease": lease}
        )
        assert late.status_code == 409
    task = await rig.task(task_id)
    assert (task["state"], task["result"]) == ("succeeded", {"n": 42})
    logs = (await rig.api.get(f"/v1/tasks/{task_id}/logs")).json()["items"]
    assert [line["message"] for line in logs] == ["half way"]


async def test_client_error_fails_without_retry_and_dead_letters(rig: Rig) -> None:
    rig.worker.script["bad"] = (422, {"error": "no such thing", "retryable": False})
    task_id = await rig.enqueue("bad")
    task = await rig.finished(task_id)
    assert task["state"] == "dead"
    assert len(task["attempts"]) == 1
    assert task["attempts"][0]["outcome"] == "failed"
    assert task["error"] == "no such thing"


async def test_server_errors_retry_with_backoff_until_attempts_run_out(rig: Rig) -> None:
    await rig.queue(
        "q",
        max_attempts=3,
        dead_letter=False,
        backoff={"strategy": "constant", "base_delay": 0.3, "max_delay": 1},
    )
    rig.worker.script["flaky"] = (500, {"error": "boom", "traceback": "Traceback: boom"})
    task_id = await rig.enqueue("flaky")
    task = await rig.finished(task_id)
    assert task["state"] == "failed"
    attempts = task["attempts"]
    assert [a["outcome"] for a in attempts] == ["error", "error", "error"]
    assert attempts[0]["traceback"] == "Traceback: boom"
    starts = [_seconds(a["started_at"]) for a in attempts]
    ends = [_seconds(a["ended_at"]) for a in attempts]
    for end, next_start in zip(ends, starts[1:], strict=False):
        assert 0.3 <= next_start - end < 0.6


async def test_busy_answer_honours_retry_after_without_spending_attempts(rig: Rig) -> None:
    await rig.queue("q", max_attempts=1)
    calls = 0

    def busy_once(push: PushBody) -> tuple[int, Any, dict[str, str]] | tuple[int, Any]:
        nonlocal calls
        calls += 1
        return (429, None, {"retry-after": "1"}) if calls == 1 else (200, "done")

    rig.worker.script["busy"] = busy_once
    task_id = await rig.enqueue("busy")
    task = await rig.finished(task_id)
    assert task["state"] == "succeeded"
    assert [a["outcome"] for a in task["attempts"]] == ["busy", "succeeded"]
    assert [a["number"] for a in task["attempts"]] == [1, 1]
    gap = _seconds(task["attempts"][1]["started_at"]) - _seconds(task["attempts"][0]["ended_at"])
    assert 1.0 <= gap < 1.5


async def test_gone_disables_the_endpoint_and_keeps_the_task(rig: Rig) -> None:
    rig.worker.script["any"] = (410, None)
    task_id = await rig.enqueue("any")
    await until(lambda: rig.worker.pushes(task_id), what="push")
    endpoints = await until(lambda: _disabled(rig), what="endpoint disabled")
    assert endpoints[0]["disabled_reason"]
    task = await until(lambda: _state(rig, task_id, "queued"), what="task back in queue")
    assert task["attempt"] == 0
    assert [a["outcome"] for a in task["attempts"]] == ["gone"]


async def test_checkpoint_reaches_the_next_attempt(rig: Rig) -> None:
    await rig.queue("q", lease_timeout=0.5)
    rig.worker.script["resumable"] = lambda push: (
        (202, None) if push.attempt == 1 else (200, push.checkpoint)
    )
    task_id = await rig.enqueue("resumable")
    await until(lambda: rig.worker.pushes(task_id), what="first push")
    ((headers, _),) = rig.worker.pushes(task_id)
    async with httpx.AsyncClient() as cb:
        r = await cb.post(
            f"{headers['jobgate-callback']}/checkpoint",
            json={"state": {"done": 7}},
            headers={"jobgate-lease": headers["jobgate-lease"]},
        )
        assert r.status_code == 200
    # The worker goes silent: the lease expires, attempt 2 gets the checkpoint.
    task = await rig.finished(task_id)
    assert task["state"] == "succeeded"
    assert task["result"] == {"done": 7}
    assert [a["outcome"] for a in task["attempts"]] == ["expired", "succeeded"]


async def test_unreachable_endpoint_is_retried(rig: Rig) -> None:
    from tests.support import free_port

    await rig.queue(
        "dead-end", max_attempts=2, backoff={"strategy": "constant", "base_delay": 0.05}
    )
    r = await rig.api.post(
        "/v1/queues/dead-end/endpoints", json={"url": f"http://127.0.0.1:{free_port()}/"}
    )
    assert r.status_code == 201
    task_id = await rig.enqueue("x", queue="dead-end")
    task = await rig.finished(task_id)
    assert task["state"] == "dead"
    assert [a["outcome"] for a in task["attempts"]] == ["error", "error"]
    assert "Connect" in task["attempts"][0]["error"] or "refused" in task["attempts"][0]["error"]


async def _disabled(rig: Rig) -> list[dict[str, Any]] | None:
    items = (await rig.api.get("/v1/queues/q/endpoints")).json()["items"]
    return items if not items[0]["enabled"] else None


async def _state(rig: Rig, task_id: str, state: str) -> dict[str, Any] | None:
    task = await rig.task(task_id)
    return task if task["state"] == state else None


def _seconds(stamp: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(stamp).timestamp()


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        ("constant", [0.2, 0.2, 0.2]),
        ("linear", [0.1, 0.2, 0.3]),
        ("exponential", [0.1, 0.2, 0.3]),  # 0.4 is capped at max_delay
        ("exponential_jitter", [0.1, 0.2, 0.3]),  # upper bounds: uniform(0, bound)
    ],
)
async def test_backoff_strategies_space_retries_as_documented(
    rig: Rig, strategy: str, expected: list[float]
) -> None:
    base = 0.2 if strategy == "constant" else 0.1
    await rig.queue(
        "q",
        max_attempts=4,
        backoff={"strategy": strategy, "base_delay": base, "max_delay": 0.3},
    )
    rig.worker.script["failing"] = (500, {"error": "again"})
    task = await rig.finished(await rig.enqueue("failing"))
    attempts = task["attempts"]
    gaps = [
        _seconds(later["started_at"]) - _seconds(earlier["ended_at"])
        for earlier, later in itertools.pairwise(attempts)
    ]
    assert len(gaps) == 3
    # The recoverer runs every 50 ms, so a retry starts up to that much (plus a push) late.
    for gap, delay in zip(gaps, expected, strict=True):
        low = 0 if strategy == "exponential_jitter" else delay
        assert low <= gap < delay + 0.25, (strategy, gaps)


async def test_sdk_async_client_over_its_default_transport(rig: Rig) -> None:
    from sdk import AsyncClient, TaskState

    async with AsyncClient(rig.gateway_url, ADMIN) as client:
        tasks = await asyncio.gather(*(client.enqueue("q", "hello", i) for i in range(20)))
        done = await asyncio.gather(*(client.wait(t.id, timeout=10) for t in tasks))
    assert {t.state for t in done} == {TaskState.SUCCEEDED}
    assert sorted(t.result["echo"] for t in done) == list(range(20))  # type: ignore[index]


async def test_a_batch_endpoint_gets_a_lone_task_at_once_and_a_backlog_in_batches(
    rig: Rig,
) -> None:
    """Batching costs an idle queue nothing: the gateway waits for no second task (a lone task
    goes alone, in a batch of one), and fills pushes only from tasks already waiting."""
    await rig.queue("bulk")
    worker_url = (await rig.api.get("/v1/queues/q/endpoints")).json()["items"][0]["url"]
    r = await rig.api.post(
        "/v1/queues/bulk/endpoints", json={"url": worker_url, "batch_size": 10, "concurrency": 50}
    )
    rig.worker.secret = r.json()["secret"]
    lone = await rig.enqueue("hello", 0, queue="bulk")
    assert (await rig.finished(lone))["result"] == {"echo": 0}
    assert rig.worker.batches == [1]
    await rig.api.patch("/v1/queues/bulk", json={"paused": True})
    batch = [{"name": "hello", "payload": i} for i in range(1, 8)]
    created = await rig.api.post("/v1/queues/bulk/tasks/batch", json={"tasks": batch})
    await rig.api.patch("/v1/queues/bulk", json={"paused": False})
    for task in created.json()["tasks"]:
        await rig.finished(task["id"])
    assert rig.worker.batches == [1, 7]


async def test_a_batch_answered_partly_inline_and_partly_accepted(rig: Rig) -> None:
    """One push's answers are recorded together: the ends in one write, the acceptances (202)
    in another; each task then goes its own way."""
    await rig.queue("bulk", paused=True)
    worker_url = (await rig.api.get("/v1/queues/q/endpoints")).json()["items"][0]["url"]
    r = await rig.api.post("/v1/queues/bulk/endpoints", json={"url": worker_url, "batch_size": 8})
    rig.worker.secret = r.json()["secret"]
    rig.worker.script["long"] = (202, None)
    batch = [{"name": "hello", "payload": 1}, {"name": "long"}, {"name": "hello", "payload": 2}]
    created = await rig.api.post("/v1/queues/bulk/tasks/batch", json={"tasks": batch})
    first, long, last = (t["id"] for t in created.json()["tasks"])
    await rig.api.patch("/v1/queues/bulk", json={"paused": False})
    assert (await rig.finished(first))["result"] == {"echo": 1}
    assert (await rig.finished(last))["result"] == {"echo": 2}
    assert rig.worker.batches == [3]
    assert (await rig.task(long))["state"] == "running"
    ((_, item),) = rig.worker.pushes(long)
    assert isinstance(item, BatchItem)
    async with httpx.AsyncClient() as cb:
        ok = await cb.post(
            f"{item.callback}/result",
            json={"result": "later"},
            headers={"jobgate-lease": item.lease},
        )
    assert ok.status_code == 200, ok.text
    assert (await rig.finished(long))["result"] == "later"


async def test_batched_pushes_carry_many_tasks_and_are_answered_per_task(rig: Rig) -> None:
    await rig.queue("bulk", max_attempts=1)
    worker_url = (await rig.api.get("/v1/queues/q/endpoints")).json()["items"][0]["url"]
    r = await rig.api.post(
        "/v1/queues/bulk/endpoints", json={"url": worker_url, "batch_size": 10, "concurrency": 50}
    )
    assert r.status_code == 201, r.text
    assert r.json()["batch_size"] == 10
    rig.worker.secret = r.json()["secret"]
    rig.worker.script["refused"] = (422, {"error": "no", "retryable": False})
    await rig.api.patch("/v1/queues/bulk", json={"paused": True})
    batch = [{"name": "hello", "payload": i} for i in range(24)] + [{"name": "refused"}]
    created = await rig.api.post("/v1/queues/bulk/tasks/batch", json={"tasks": batch})
    ids = [t["id"] for t in created.json()["tasks"]]
    await rig.api.patch("/v1/queues/bulk", json={"paused": False})
    done = [await rig.finished(task_id) for task_id in ids]
    assert [t["result"] for t in done[:24]] == [{"echo": i} for i in range(24)]
    assert (done[24]["state"], done[24]["error"]) == ("dead", "no")
    assert sum(rig.worker.batches) == 25
    assert max(rig.worker.batches) == 10
    assert len(rig.worker.batches) < 25  # many tasks shared a push


async def test_a_task_that_failed_once_and_then_succeeded_reads_as_succeeded(rig: Rig) -> None:
    """The task's ``error`` is its final outcome's: none once it succeeded. The first attempt's
    error stays with that attempt (issue 31: the summary read as an error)."""
    await rig.queue("q", backoff={"strategy": "constant", "base_delay": 0.05, "max_delay": 1})
    rig.worker.script["carrier"] = lambda push: (
        (500, {"error": "TimeoutError: the carrier's API did not answer"})
        if push.attempt == 1
        else (200, {"shipped": True})
    )
    task_id = await rig.enqueue("carrier")
    task = await rig.finished(task_id)
    assert (task["state"], task["result"], task["error"]) == ("succeeded", {"shipped": True}, None)
    assert [(a["outcome"], a["error"]) for a in task["attempts"]] == [
        ("error", "TimeoutError: the carrier's API did not answer"),
        ("succeeded", None),
    ]
