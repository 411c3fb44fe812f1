"""The push timeout, kept by the pusher's deadlines (gateway/dispatch/deadlines.py) rather than
by aiohttp's per-request timer: a worker that never answers gives the TIMEOUT answer at the
push timeout, one that answers in time is not cut, and another cancellation of the pushing task
still cancels it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from gateway.dispatch.pusher import Pusher, new_session
from gateway.store.endpoint_records import EndpointRecord
from sdk.wire import FailureKind


async def _answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            request = await reader.readuntil(b"\r\n\r\n")
            length = int(request.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
            await reader.readexactly(length)
            if request.startswith(b"POST /never"):
                await reader.read()  # until the gateway gives up and closes the connection
                return
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nnull")
            await writer.drain()
    except asyncio.IncompleteReadError:
        return  # the pool closed the connection
    finally:
        writer.close()
        await writer.wait_closed()


@pytest.fixture
async def server() -> AsyncIterator[str]:
    started = await asyncio.start_server(_answer, "127.0.0.1", 0)
    port = started.sockets[0].getsockname()[1]
    async with started:
        yield f"http://127.0.0.1:{port}"


def endpoint(url: str) -> EndpointRecord:
    return EndpointRecord(
        id="e", queue="q", url=url, concurrency=1, capabilities=[], secrets=[], created_ms=0
    )


async def test_a_push_unanswered_times_out_and_one_answered_is_not_cut(server: str) -> None:
    async with new_session(allow_private=True) as session:
        pusher = Pusher(session, "http://gw")
        started = time.monotonic()
        answer = await pusher._send(endpoint(server + "/never"), b"{}", {}, 0.3)
        assert 0.25 < time.monotonic() - started < 2
        assert (answer.status, answer.kind) == (None, FailureKind.TIMEOUT)
        assert answer.failure == "no answer within 0.3s"
        task = asyncio.current_task()
        assert task is not None
        assert task.cancelling() == 0  # the cut was undone
        for _ in range(3):  # answered well within: the deadlines left behind cut nothing
            answer = await pusher._send(endpoint(server + "/ok"), b"{}", {}, 0.2)
            assert answer.status == 200
        await asyncio.sleep(0.3)  # past those deadlines
        assert (await pusher._send(endpoint(server + "/ok"), b"{}", {}, 5)).status == 200


async def test_another_cancellation_of_a_push_is_not_taken_for_its_timeout(server: str) -> None:
    async with new_session(allow_private=True) as session:
        pusher = Pusher(session, "http://gw")
        push = asyncio.create_task(pusher._send(endpoint(server + "/never"), b"{}", {}, 30))
        await asyncio.sleep(0.1)
        push.cancel()
        with pytest.raises(asyncio.CancelledError):
            await push
