"""Async-generator tasks: each value yielded is progress (a heartbeat), the last the result."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from sdk import task
from tests.sdk.fakes import FakeGateway, MakeWorker, Serve


async def test_yields_are_heartbeats_with_progress_and_the_last_is_the_result(
    make_worker: MakeWorker, serve: Serve, gateway: FakeGateway
) -> None:
    @task("default", name="count")
    async def count(n: int) -> AsyncIterator[object]:
        for i in range(1, n + 1):
            await asyncio.sleep(0.25)  # slower than the heartbeat throttle: each one is sent
            yield i / n
        yield {"counted": n}

    worker = make_worker([count], inline_window=0.01)
    async with serve(worker) as push:
        assert (await push("count", {"args": [3]})).status_code == 202
        [result] = await gateway.wait_for("result")
    assert result.body == {"result": {"counted": 3}}
    progress = [c.body.get("progress") for c in gateway.calls if c.kind == "heartbeat"]
    assert progress[:3] == [1 / 3, 2 / 3, 1.0]
    assert progress[3:] in ([], [None])  # the result is no fraction: at most a bare heartbeat


async def test_a_fast_generator_answers_inline_with_its_last_value(
    make_worker: MakeWorker, serve: Serve, gateway: FakeGateway
) -> None:
    @task("default", name="quick")
    async def quick() -> AsyncIterator[int]:
        for i in range(1000):
            yield i

    async with serve(make_worker([quick])) as push:
        answer = await push("quick")
    assert answer.status_code == 200
    assert answer.json() == 999  # an inline answer is the result itself
    assert len([k for k in gateway.kinds() if k == "heartbeat"]) <= 1  # throttled


async def test_a_cancel_in_a_heartbeat_answer_closes_the_generator(
    make_worker: MakeWorker, serve: Serve, gateway: FakeGateway
) -> None:
    closed = asyncio.Event()

    @task("default", name="endless")
    async def endless() -> AsyncIterator[float]:
        try:
            while True:
                await asyncio.sleep(0.25)
                yield 0.5
        finally:
            closed.set()

    gateway.cancel = True
    async with serve(make_worker([endless], inline_window=0)) as push:
        assert (await push("endless")).status_code == 202
        [error] = await gateway.wait_for("error")
    assert closed.is_set()
    assert error.body == {"error": "cancelled", "retryable": False}
