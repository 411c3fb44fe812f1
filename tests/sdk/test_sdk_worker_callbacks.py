"""Tasks that outlive the inline window: 202, heartbeats, callbacks, cancel, stale leases."""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest

from sdk import AsyncContext, Context, Retry, task
from tests.sdk.fakes import LEASE, FakeGateway, MakeWorker, Serve


async def test_async_task_answers_202_then_heartbeats_and_result(
    make_worker: MakeWorker, serve: Serve, gateway: FakeGateway
) -> None:
    release = asyncio.Event()

    @task("default", name="slow")
    async def slow(n: int) -> int:
        await release.wait()
        return n * 2

    worker = make_worker([slow], inline_window=0.01, heartbeat_interval=0.01)
    async with serve(worker) as push:
        response = await push("slow", {"args": [21]})
        assert response.status_code == 202
        await gateway.wait_for("heartbeat")
        release.set()
        [result] = await gateway.wait_for("result")
    assert result.body == {"result": 42}
    assert {call.lease for call in gateway.calls} == {LEASE}
    assert set(gateway.kinds()) == {"heartbeat", "result"}
    assert gateway.kinds()[-1] == "result"
    assert worker.running == 0


async def test_sync_task_context_calls_reach_the_gateway(
    make_worker: MakeWorker, serve: Serve, gateway: FakeGateway
) -> None:
    release = threading.Event()

    @task("default", name="report")
    def report(ctx: Context) -> str:
        ctx.heartbeat(progress=0.5)
        ctx.checkpoint({"done": 1})
        ctx.log("halfway", level="warning")
        release.wait(5)
        return "ok"

    async with serve(make_worker([report], inline_window=0, heartbeat_interval=60)) as push:
        response = await push("report")
        assert response.status_code == 202
        await gateway.wait_for("logs")
        release.set()
        [result] = await gateway.wait_for("result")
    assert gateway.kinds() == ["heartbeat", "checkpoint", "logs", "result"]
    assert gateway.of("heartbeat")[0].body == {"progress": 0.5}
    assert gateway.of("checkpoint")[0].body == {"state": {"done": 1}}
    [line] = gateway.of("logs")[0].body["lines"]
    assert (line["message"], line["level"]) == ("halfway", "warning")
    assert result.body == {"result": "ok"}


async def test_a_task_that_refuses_inline_always_calls_back(
    make_worker: MakeWorker, serve: Serve, gateway: FakeGateway
) -> None:
    @task("default", name="quick", inline=False)
    async def quick() -> str:
        return "done"

    async with serve(make_worker([quick])) as push:
        response = await push("quick")
        [result] = await gateway.wait_for("result")
    assert response.status_code == 202
    assert result.body == {"result": "done"}


async def test_errors_after_202_go_to_the_error_callback(
    make_worker: MakeWorker, serve: Serve, gateway: FakeGateway
) -> None:
    @task("default", name="later")
    async def later() -> None:
        raise Retry(delay=2)

    @task("default", name="broken")
    def broken() -> None:
        raise RuntimeError("disk full")

    async with serve(make_worker([later, broken], inline_window=0)) as push:
        assert (await push("later")).status_code == 202
        assert (await push("broken")).status_code == 202
        errors = await gateway.wait_for("error", count=2)
    bodies = {call.body["error"]: call.body for call in errors}
    assert bodies["retry requested"] == {
        "error": "retry requested",
        "retryable": True,
        "retry_delay": 2.0,
    }
    assert bodies["RuntimeError: disk full"]["retryable"] is True
    assert "in broken" in bodies["RuntimeError: disk full"]["traceback"]


async def test_cancel_in_heartbeat_answer_stops_an_async_task(
    make_worker: MakeWorker, serve: Serve, gateway: FakeGateway
) -> None:
    stopped = asyncio.Event()

    @task("default", name="forever")
    async def forever() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            stopped.set()

    gateway.cancel = True
    async with serve(make_worker([forever], inline_window=0, heartbeat_interval=0.01)) as push:
        assert (await push("forever")).status_code == 202
        [error] = await gateway.wait_for("error")
    assert stopped.is_set()
    assert error.body == {"error": "cancelled", "retryable": False}
    assert "result" not in gateway.kinds()


async def test_cancel_raises_in_a_sync_task_at_its_next_heartbeat(
    make_worker: MakeWorker, serve: Serve, gateway: FakeGateway
) -> None:
    go = threading.Event()
    seen: list[bool] = []

    @task("default", name="polite")
    def polite(ctx: Context) -> str:
        go.wait(5)
        seen.append(ctx.cancelled)
        ctx.heartbeat()
        return "not cancelled"

    gateway.cancel = True
    async with serve(make_worker([polite], inline_window=0, heartbeat_interval=0.01)) as push:
        assert (await push("polite")).status_code == 202
        await gateway.wait_for("heartbeat", count=2)  # the first answer has been acted on
        go.set()
        [error] = await gateway.wait_for("error")
    assert seen == [True]
    assert error.body == {"error": "cancelled", "retryable": False}


async def test_a_step_whose_answer_asks_to_stop_stops_the_task_once_recorded(
    make_worker: MakeWorker, serve: Serve, gateway: FakeGateway
) -> None:
    """The gateway records a step of an attempt asked to stop and says so in its answer
    (docs/durable.md): ctx.step raises Cancelled there, in both contexts, as a heartbeat's
    answer would, so a task that records steps but seldom heartbeats stops at its next one."""
    went_on: list[str] = []

    @task("default", name="async_steps")
    async def async_steps(ctx: AsyncContext) -> str:
        await ctx.step("a", lambda: 1)
        went_on.append("async")
        return "not cancelled"

    @task("default", name="sync_steps")
    def sync_steps(ctx: Context) -> str:
        ctx.step("a", lambda: 1)
        went_on.append("sync")
        return "not cancelled"

    gateway.cancel = True
    worker = make_worker([async_steps, sync_steps], inline_window=0, heartbeat_interval=60)
    async with serve(worker) as push:
        for name in ("async_steps", "sync_steps"):
            assert (await push(name)).status_code == 202
        errors = await gateway.wait_for("error", count=2)
    assert [e.body for e in errors] == [{"error": "cancelled", "retryable": False}] * 2
    assert [c.body for c in gateway.of("step")] == [{"name": "a", "result": 1}] * 2
    assert went_on == []
    assert "result" not in gateway.kinds()


async def test_cancel_seen_inline_answers_cancelled(
    make_worker: MakeWorker, serve: Serve, gateway: FakeGateway
) -> None:
    @task("default", name="checks")
    async def checks(ctx: AsyncContext) -> str:
        await ctx.heartbeat(progress=0.1)
        return "not cancelled"

    gateway.cancel = True
    async with serve(make_worker([checks])) as push:
        response = await push("checks")
    assert response.status_code == 422
    assert response.json() == {"error": "cancelled", "retryable": False}


@pytest.mark.parametrize(
    ("status", "title", "logged"),
    [
        (409, "refused", "the lease is stale"),  # re-dispatched: another attempt owns it
        (404, "Task not found", "Task not found"),  # deleted while it ran
        (404, "Queue not found", "Queue not found"),  # its queue deleted (forced)
    ],
)
async def test_a_heartbeat_refused_for_the_lease_stops_the_task_quietly(
    make_worker: MakeWorker,
    serve: Serve,
    gateway: FakeGateway,
    caplog: pytest.LogCaptureFixture,
    status: int,
    title: str,
    logged: str,
) -> None:
    stopped = asyncio.Event()

    @task("default", name="zombie")
    async def zombie() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            stopped.set()

    gateway.status["heartbeat"] = status
    gateway.title["heartbeat"] = title
    worker = make_worker([zombie], inline_window=0, heartbeat_interval=0.01, shutdown_timeout=5)
    with caplog.at_level(logging.INFO, logger="sdk"):
        async with serve(worker) as push:
            assert (await push("zombie")).status_code == 202
            await asyncio.wait_for(stopped.wait(), 5)
        # the lifespan's exit waited for the attempt's supervision to end
    assert worker.running == 0
    assert gateway.kinds() == ["heartbeat"]  # nothing more, no result
    assert logged in caplog.text


@pytest.mark.parametrize("status", [500, 404])  # 404 not the gateway's: a proxy's, say
async def test_a_failed_heartbeat_is_tried_again_at_the_next_interval(
    make_worker: MakeWorker,
    serve: Serve,
    gateway: FakeGateway,
    caplog: pytest.LogCaptureFixture,
    status: int,
) -> None:
    release = asyncio.Event()

    @task("default", name="waits")
    async def waits() -> str:
        await release.wait()
        return "done"

    gateway.status["heartbeat"] = status
    worker = make_worker([waits], inline_window=0, heartbeat_interval=0.01)
    async with serve(worker) as push:
        assert (await push("waits")).status_code == 202
        await gateway.wait_for("heartbeat", count=3)
        release.set()
        await gateway.wait_for("result")
    # a 5xx is tried again within the callback (sdk/callbacks.py), a 404 at the next interval
    assert ("heartbeat callback failed" if status == 500 else "heartbeat failed") in caplog.text


async def test_409_on_the_result_is_not_retried(
    make_worker: MakeWorker, serve: Serve, gateway: FakeGateway, caplog: pytest.LogCaptureFixture
) -> None:
    @task("default", name="late", inline=False)
    def late() -> int:
        return 1

    gateway.status["result"] = 409
    worker = make_worker([late], shutdown_timeout=5)
    with caplog.at_level(logging.INFO, logger="sdk"):
        async with serve(worker) as push:
            assert (await push("late")).status_code == 202
            await gateway.wait_for("result")
    assert worker.running == 0
    assert gateway.kinds() == ["result"]
    assert "stale" in caplog.text


async def test_busy_worker_answers_503(
    make_worker: MakeWorker, serve: Serve, gateway: FakeGateway
) -> None:
    release = asyncio.Event()

    @task("default", name="hog")
    async def hog() -> None:
        await release.wait()

    worker = make_worker([hog], inline_window=0, heartbeat_interval=60, max_concurrency=1)
    async with serve(worker) as push:
        first = await push("hog")
        second = await push("hog")
        release.set()
        await gateway.wait_for("result")
    assert first.status_code == 202
    assert second.status_code == 503
    assert second.headers["retry-after"] == "1"
