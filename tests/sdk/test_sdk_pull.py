"""The pull worker against a scripted lease client and the fake gateway's callbacks: tasks report
by callback only, refusals by the error callback; leases never ask for more than the free slots
and a full worker waits for a slot; connection errors back off; stop applies the shutdown
policy."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, cast

import httpx
import pytest

from sdk import AsyncClient, PullWorker, task
from sdk import pull as pull_module
from sdk.errors import ApiError
from sdk.wire import BatchItem, Problem
from tests.sdk.fakes import FakeGateway, MakeWorker, batch_item
from tests.support import until

release = asyncio.Event()


@task("default", name="double")
def double(x: int) -> int:
    return 2 * x


@task("default", name="held")
async def held() -> str:
    await release.wait()
    return "released"


@pytest.fixture(autouse=True)
def _fresh_release() -> None:
    global release
    release = asyncio.Event()


class Leases:
    """A stand-in for ``AsyncClient.lease``: answers each call with ``answer(max_tasks)``."""

    def __init__(self, answer: Callable[[int], list[dict[str, Any]] | Exception]) -> None:
        self.answer = answer
        self.asked: list[int] = []
        self.called = asyncio.Event()
        self.blocked = asyncio.Event()  # set while a call waits forever (answer returned [])

    async def lease(
        self, queue: str, endpoint_id: str, max_tasks: int = 1, wait: float = 30
    ) -> list[BatchItem]:
        self.asked.append(max_tasks)
        self.called.set()
        answer = self.answer(max_tasks)
        if isinstance(answer, Exception):
            raise answer
        if not answer:
            self.blocked.set()
            await asyncio.Event().wait()  # a long poll that never ends
        return [BatchItem.model_validate(item) for item in answer]


def client(leases: Leases) -> AsyncClient:
    return cast(AsyncClient, leases)


async def run_until(pulling: PullWorker, stop: asyncio.Event, done: Callable[[], bool]) -> None:
    runner = asyncio.create_task(pulling.run(stop))
    try:
        await until(done, what="the pulled tasks to report")
    finally:
        stop.set()
        await asyncio.wait_for(runner, 10)


async def test_leased_tasks_report_by_callback_and_refusals_by_error(
    make_worker: MakeWorker, gateway: FakeGateway
) -> None:
    worker = make_worker([double])
    items = [
        batch_item("double", {"args": [21]}),
        batch_item("nope", {"args": []}),
        batch_item("double", {"args": ["x", "y", "z"]}),
    ]
    batches = iter([items])
    leases = Leases(lambda n: next(batches, []))
    stop = asyncio.Event()
    pulling = worker.pull(client(leases), "default", "ep_pull")
    await run_until(pulling, stop, lambda: len(gateway.calls) >= 3)
    results = gateway.of("result")
    errors = {call.task_id: call.body for call in gateway.of("error")}
    assert [call.body["result"] for call in results] == [42]
    assert results[0].lease == items[0]["lease"]
    unknown = errors[items[1]["id"]]
    assert unknown["retryable"] is False
    assert "no task named 'nope'" in unknown["error"]
    assert errors[items[2]["id"]]["retryable"] is False


async def test_leases_ask_for_free_slots_only_and_wait_for_one_to_free(
    make_worker: MakeWorker, gateway: FakeGateway
) -> None:
    worker = make_worker([held], max_concurrency=2)
    leases = Leases(
        lambda n: [batch_item("held") for _ in range(n)] if not release.is_set() else []
    )
    stop = asyncio.Event()
    pulling = worker.pull(client(leases), "default", "ep_pull", max_tasks=5)
    runner = asyncio.create_task(pulling.run(stop))
    await until(lambda: worker.running == 2, what="two tasks to run")
    # Full: no lease is asked for while no slot is free.
    leases.called.clear()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(leases.called.wait(), 0.3)
    assert leases.asked == [2]
    release.set()  # both end: two slots free, asked for again
    await gateway.wait_for("result", 2)
    await asyncio.wait_for(leases.blocked.wait(), 5)
    assert leases.asked[1] in (1, 2)
    stop.set()
    await asyncio.wait_for(runner, 10)


async def test_connection_errors_back_off_then_leasing_resumes(
    make_worker: MakeWorker,
    gateway: FakeGateway,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(pull_module, "MIN_BACKOFF", 0.01)
    answers: list[list[dict[str, Any]] | Exception] = [
        httpx.ConnectError("refused"),
        ApiError(503, Problem(title="Unavailable", status=503)),
        [batch_item("double", {"args": [1]})],
    ]
    leases = Leases(lambda n: answers.pop(0) if answers else [])
    worker = make_worker([double])
    stop = asyncio.Event()
    with caplog.at_level(logging.WARNING, logger="sdk.pull"):
        await run_until(
            worker.pull(client(leases), "default", "ep_pull"),
            stop,
            lambda: bool(gateway.of("result")),
        )
    assert len(leases.asked) >= 3
    assert sum("retrying in" in r.getMessage() for r in caplog.records) == 2


async def test_a_refused_lease_ends_the_run(make_worker: MakeWorker) -> None:
    forbidden = ApiError(403, Problem(title="Forbidden", status=403))
    leases = Leases(lambda n: forbidden)
    with pytest.raises(ApiError):
        await asyncio.wait_for(
            make_worker([double]).pull(client(leases), "q", "ep").run(asyncio.Event()), 5
        )


async def test_stop_drops_the_poll_and_requeues_running_tasks(
    make_worker: MakeWorker, gateway: FakeGateway
) -> None:
    worker = make_worker([held], shutdown="requeue", max_concurrency=4)
    batches = iter([[batch_item("held")]])
    leases = Leases(lambda n: next(batches, []))
    stop = asyncio.Event()
    runner = asyncio.create_task(worker.pull(client(leases), "default", "ep").run(stop))
    await asyncio.wait_for(leases.blocked.wait(), 5)  # the task runs, the next poll waits
    assert worker.running == 1
    stop.set()
    await asyncio.wait_for(runner, 10)
    assert gateway.kinds().count("release") == 1
    assert worker.running == 0
