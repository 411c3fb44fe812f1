"""A task that succeeds with a warning: ``return Warn(message, result=...)``, answered inline
(the jobgate-warning header), in a batch (the result's warning) or by the result callback."""

from __future__ import annotations

import asyncio
from urllib.parse import unquote

from sdk import Warn, task
from sdk.wire import HEADER_WARNING
from tests.sdk.fakes import FakeGateway, MakeWorker, Serve, batch_answer

MESSAGE = "3 rows skipped: ünïcode,\nand a second line"


@task("default", name="partial")
def partial() -> Warn:
    return Warn(MESSAGE, result={"rows": 97})


@task("default", name="partial_later")
async def partial_later() -> Warn:
    await asyncio.sleep(0.05)
    return Warn("late", result=1)


async def test_an_inline_success_carries_its_warning_in_a_header(
    make_worker: MakeWorker, serve: Serve
) -> None:
    async with serve(make_worker([partial])) as push:
        response = await push("partial")
    assert response.status_code == 200
    assert response.json() == {"rows": 97}
    assert unquote(response.headers[HEADER_WARNING]) == MESSAGE


async def test_a_plain_success_has_no_warning_header(make_worker: MakeWorker, serve: Serve) -> None:
    @task("default", name="plain")
    def plain() -> int:
        return 1

    async with serve(make_worker([plain])) as push:
        response = await push("plain")
    assert HEADER_WARNING not in response.headers


async def test_a_batch_result_carries_its_warning(make_worker: MakeWorker, serve: Serve) -> None:
    async with serve(make_worker([partial])) as push:
        answer = batch_answer(await push.batch(push.item("partial")))
    [result] = answer.results
    assert (result.status, result.result, result.warning) == (200, {"rows": 97}, MESSAGE)


async def test_the_result_callback_carries_the_warning(
    make_worker: MakeWorker, serve: Serve, gateway: FakeGateway
) -> None:
    async with serve(make_worker([partial_later], inline_window=0)) as push:
        assert (await push("partial_later")).status_code == 202
        [result] = await gateway.wait_for("result")
    assert result.body == {"result": 1, "warning": "late"}
