"""A request's body goes out in the step that buffers its headers (sdk/eager_body.py), and the
body writer's coroutine, started early, ends as a task would have ended it."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest
from aiohttp.connector import Connection

from sdk.eager_body import EagerBodyRequest, started


async def test_a_coroutine_done_in_its_first_step_has_run_before_its_task() -> None:
    ran = []

    async def quick() -> int:
        ran.append(1)
        return 7

    rest = started(quick())
    assert ran == [1]
    assert await asyncio.create_task(rest) == 7


async def test_a_coroutine_that_waits_is_resumed_with_what_it_waited_for() -> None:
    future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    steps = []

    async def waits() -> int:
        steps.append("first")
        got = await future
        steps.append("second")
        return got + 1

    task = asyncio.create_task(started(waits()))
    assert steps == ["first"]
    await asyncio.sleep(0)
    assert not task.done()
    future.set_result(41)
    assert await task == 42
    assert steps == ["first", "second"]


async def test_what_the_first_step_raises_the_task_raises() -> None:
    async def fails() -> None:
        raise ValueError("no")

    with pytest.raises(ValueError, match="no"):
        await asyncio.create_task(started(fails()))


async def test_a_cancel_while_it_waits_is_thrown_into_the_coroutine() -> None:
    seen = []

    async def waits() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    task = asyncio.create_task(started(waits()))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert seen == ["cancelled"]


class _Watched(EagerBodyRequest):
    """Notes what had been written to the connection when ``send`` returned."""

    written: list[bytes] = []
    at_send: list[bytes] = []

    async def send(self, conn: Connection) -> Any:
        transport = conn.transport
        assert transport is not None
        write, writelines = transport.write, transport.writelines

        def noted(data: Any) -> None:
            _Watched.written.append(bytes(data))
            write(data)

        def noted_lines(chunks: Any) -> None:
            _Watched.written.append(b"".join(chunks))
            writelines(chunks)

        transport.write, transport.writelines = noted, noted_lines  # type: ignore[method-assign]
        response = await super().send(conn)
        _Watched.at_send.append(b"".join(_Watched.written))
        return response


async def test_the_body_is_written_with_the_headers_before_send_returns() -> None:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        await reader.readexactly(len(b'{"a":1}'))
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    _Watched.written, _Watched.at_send = [], []
    async with (
        server,
        aiohttp.ClientSession(request_class=_Watched) as session,
        session.post(f"http://127.0.0.1:{port}/push", data=b'{"a":1}') as response,
    ):
        assert await response.read() == b"ok"
    [sent] = _Watched.at_send
    assert sent.startswith(b"POST /push HTTP/1.1\r\n")
    assert sent.endswith(b'\r\n\r\n{"a":1}')
