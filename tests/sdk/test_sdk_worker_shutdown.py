"""The worker's shutdown policies (finish, requeue, fail) for tasks in the background and tasks
still answered inline, and its concurrency cap."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

import pytest

from sdk import AsyncContext, Cancelled, Context, Worker, task
from tests.sdk.fakes import LEASE, SECRET, FakeGateway, MakeWorker, Serve, batch_answer
from tests.support import until

RELEASED_INLINE = {"error": "the worker shut down: task handed back", "retryable": True}


class Endless:
    """An async task that runs until stopped, with events for its start and its ``finally``."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.stopped = asyncio.Event()

        @task("default", name="endless")
        async def endless() -> None:
            self.started.set()
            try:
                await asyncio.Event().wait()
            finally:
                self.stopped.set()

        self.fn = endless


async def test_finish_waits_for_background_tasks_and_refuses_new_ones(
    make_worker: MakeWorker, serve: Serve, gateway: FakeGateway
) -> None:
    release = asyncio.Event()

    @task("default", name="slow")
    async def slow() -> str:
        await release.wait()
        return "done"

    worker = make_worker([slow], inline_window=0, heartbeat_interval=60, shutdown_timeout=30)
    async with serve(worker) as push:
        assert (await push("slow")).status_code == 202
        shutdown = asyncio.create_task(worker.shutdown())
        await until(lambda: worker.runner.closing, what="shutdown begun")
        refused = await push("slow")
        assert not shutdown.done()
        release.set()
        await asyncio.wait_for(shutdown, 5)
    assert (refused.status_code, refused.json()["title"]) == (503, "Worker shutting down")
    assert refused.headers["retry-after"] == "1"
    assert gateway.kinds() == ["result"]
    assert gateway.of("result")[0].body == {"result": "done"}
    assert worker.running == 0


async def test_finish_hands_back_what_outlives_the_timeout(
    make_worker: MakeWorker, serve: Serve, gateway: FakeGateway
) -> None:
    job = Endless()
    worker = make_worker([job.fn], inline_window=0, heartbeat_interval=60, shutdown_timeout=0.05)
    async with serve(worker) as push:
        assert (await push("endless")).status_code == 202
        await job.started.wait()
    [release] = gateway.calls
    assert (release.kind, release.lease, release.body) == ("release", LEASE, {})
    assert job.stopped.is_set()
    assert worker.running == 0


async def test_requeue_stops_at_once_and_lets_the_task_unwind_first(
    make_worker: MakeWorker, serve: Serve, gateway: FakeGateway
) -> None:
    started = asyncio.Event()

    @task("default", name="careful")
    async def careful(ctx: AsyncContext) -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await ctx.checkpoint({"saved": True})
            raise

    worker = make_worker(
        [careful], inline_window=0, heartbeat_interval=60, shutdown="requeue", shutdown_timeout=60
    )
    async with asyncio.timeout(5):  # not the 60 s of shutdown_timeout: requeue does not wait
        async with serve(worker) as push:
            assert (await push("careful")).status_code == 202
            await started.wait()
    assert gateway.kinds() == ["checkpoint", "release"]
    assert gateway.of("checkpoint")[0].body == {"state": {"saved": True}}


async def test_fail_reports_a_final_error(
    make_worker: MakeWorker, serve: Serve, gateway: FakeGateway
) -> None:
    job = Endless()
    worker = make_worker([job.fn], inline_window=0, heartbeat_interval=60, shutdown="fail")
    async with serve(worker) as push:
        assert (await push("endless")).status_code == 202
        await job.started.wait()
    [error] = gateway.calls
    assert (error.kind, error.body) == ("error", {"error": "worker shut down", "retryable": False})
    assert job.stopped.is_set()


async def test_a_plain_function_is_flagged_and_abandoned(
    make_worker: MakeWorker, serve: Serve, gateway: FakeGateway
) -> None:
    go, done, started = threading.Event(), threading.Event(), threading.Event()
    seen: list[str] = []

    @task("default", name="blocking")
    def blocking(ctx: Context) -> None:
        started.set()
        go.wait(10)
        seen.append(f"cancelled={ctx.cancelled}")
        try:
            ctx.heartbeat()  # raises at once, without calling the gateway
        except Cancelled:
            seen.append("heartbeat raised")
        finally:
            done.set()

    worker = make_worker([blocking], inline_window=0, heartbeat_interval=60, shutdown="requeue")
    async with serve(worker) as push:
        assert (await push("blocking")).status_code == 202
        assert await asyncio.to_thread(started.wait, 5)
    assert gateway.kinds() == ["release"]  # sent without waiting for the thread
    go.set()
    assert await asyncio.to_thread(done.wait, 5)
    assert seen == ["cancelled=True", "heartbeat raised"]
    assert gateway.kinds() == ["release"]


async def test_a_task_that_will_not_stop_is_abandoned_after_the_unwind_time(
    make_worker: MakeWorker,
    serve: Serve,
    gateway: FakeGateway,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("sdk.runner.UNWIND_TIMEOUT", 0.05)
    let_go, started, ended = asyncio.Event(), asyncio.Event(), asyncio.Event()

    @task("default", name="stubborn")
    async def stubborn() -> None:
        started.set()
        while not let_go.is_set():
            with contextlib.suppress(asyncio.CancelledError):
                await let_go.wait()
        ended.set()

    worker = make_worker([stubborn], inline_window=0, heartbeat_interval=60, shutdown="requeue")
    async with serve(worker) as push:
        assert (await push("stubborn")).status_code == 202
        await started.wait()
    assert gateway.kinds() == ["release"]
    let_go.set()
    await ended.wait()


@pytest.mark.parametrize(
    ("policy", "status", "body", "retry_after"),
    [("requeue", 503, RELEASED_INLINE, "0"), ("fail", 422, {"error": "worker shut down"}, None)],
)
async def test_an_inline_push_in_flight_is_answered_by_the_policy(
    make_worker: MakeWorker,
    serve: Serve,
    gateway: FakeGateway,
    policy: str,
    status: int,
    body: dict[str, Any],
    retry_after: str | None,
) -> None:
    started = asyncio.Event()

    @task("default", name="inline")
    async def inline() -> None:
        started.set()
        await asyncio.Event().wait()

    worker = make_worker([inline], inline_window=30, heartbeat_interval=60, shutdown=policy)
    async with serve(worker) as push:
        answer = asyncio.create_task(push("inline"))
        await started.wait()
        await worker.shutdown()
        response = await answer
    assert response.status_code == status
    assert body.items() <= response.json().items()
    assert response.headers.get("retry-after") == retry_after
    assert gateway.calls == []  # the answer says it all: no callback


async def test_finish_lets_an_inline_push_answer_its_result(
    make_worker: MakeWorker, serve: Serve, gateway: FakeGateway
) -> None:
    started, release = asyncio.Event(), asyncio.Event()

    @task("default", name="inline")
    async def inline() -> int:
        started.set()
        await release.wait()
        return 7

    worker = make_worker([inline], inline_window=30, heartbeat_interval=60, shutdown_timeout=30)
    async with serve(worker) as push:
        answer = asyncio.create_task(push("inline"))
        await started.wait()
        shutdown = asyncio.create_task(worker.shutdown())
        release.set()
        response = await answer
        await shutdown
    assert (response.status_code, response.json()) == (200, 7)
    assert gateway.calls == []


async def test_a_batch_in_flight_hands_back_only_the_unfinished_tasks(
    make_worker: MakeWorker, serve: Serve, gateway: FakeGateway
) -> None:
    started = asyncio.Event()

    @task("default", name="quick")
    async def quick() -> str:
        return "quick"

    @task("default", name="hangs")
    async def hangs() -> None:
        started.set()
        await asyncio.Event().wait()

    worker = make_worker([quick, hangs], inline_window=30, shutdown="requeue")
    async with serve(worker) as push:
        answer = asyncio.create_task(push.batch(push.item("quick"), push.item("hangs")))
        await started.wait()
        await worker.shutdown()
        done, handed_back = batch_answer(await answer).results
    assert (done.status, done.result) == (200, "quick")
    assert (handed_back.status, handed_back.retry_after) == (503, 0.0)
    assert gateway.calls == []


def test_bad_options_are_refused() -> None:
    with pytest.raises(ValueError, match="shutdown must be"):
        Worker(tasks=[], secret=SECRET, shutdown="later")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_concurrency"):
        Worker(tasks=[], secret=SECRET, max_concurrency=0)


# --- the concurrency cap ----------------------------------------------------------------------


async def test_inline_tasks_count_against_the_cap(
    make_worker: MakeWorker, serve: Serve, gateway: FakeGateway
) -> None:
    started, release = asyncio.Event(), asyncio.Event()
    calls: list[int] = []

    @task("default", name="work")
    async def work(n: int) -> int:
        calls.append(n)
        if n == 1:
            started.set()
            await release.wait()
        return n

    worker = make_worker([work], inline_window=30, max_concurrency=1, busy_retry_after=2.5)
    async with serve(worker) as push:
        first = asyncio.create_task(push("work", {"args": [1]}))
        await started.wait()
        busy = await push("work", {"args": [2]})
        release.set()
        assert (await first).json() == 1
        after = await push("work", {"args": [3]})  # the slot is free again
    assert busy.status_code == 503
    assert busy.headers["retry-after"] == "3"  # whole seconds, rounded up
    assert busy.json()["title"] == "Worker busy"
    assert (after.status_code, after.json()) == (200, 3)
    assert calls == [1, 3]  # the refused task never ran
    assert gateway.calls == []


async def test_a_batch_over_the_cap_gets_503_for_the_excess_only(
    make_worker: MakeWorker, serve: Serve, gateway: FakeGateway
) -> None:
    release = asyncio.Event()

    @task("default", name="hog")
    async def hog() -> None:
        await release.wait()

    worker = make_worker(
        [hog], inline_window=0, heartbeat_interval=60, max_concurrency=3, busy_retry_after=0.5
    )
    async with serve(worker) as push:
        assert (await push("hog")).status_code == 202  # one runs already: two slots left
        response = await push.batch(*(push.item("hog") for _ in range(4)))
        assert worker.running == 3
        release.set()
        await gateway.wait_for("result", count=3)
    statuses = [(r.status, r.retry_after) for r in batch_answer(response).results]
    assert statuses == [(202, None), (202, None), (503, 0.5), (503, 0.5)]
