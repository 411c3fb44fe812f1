"""A worker's answer is read up to MAX_ANSWER_BYTES, whether its length is announced or not."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from gateway.dispatch.pusher import MAX_ANSWER_BYTES, _read_capped, new_session

BIG = MAX_ANSWER_BYTES + 1000


async def _answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    request = await reader.readuntil(b"\r\n\r\n")
    path = request.split(b" ")[1]
    if path == b"/small":
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nnull")
    elif path == b"/big":
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % BIG + b"x" * BIG)
    else:  # chunked, no length announced
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"y" * 65536
        for _ in range(BIG // len(chunk) + 1):
            writer.write(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
        writer.write(b"0\r\n\r\n")
    await writer.drain()
    writer.close()


@pytest.fixture
async def server() -> AsyncIterator[str]:
    started = await asyncio.start_server(_answer, "127.0.0.1", 0)
    port = started.sockets[0].getsockname()[1]
    async with started:
        yield f"http://127.0.0.1:{port}"


@pytest.mark.parametrize(
    ("path", "expected"),
    [("/small", 4), ("/big", MAX_ANSWER_BYTES), ("/chunked", MAX_ANSWER_BYTES)],
)
async def test_an_answer_is_read_whole_or_cut_at_the_cap(
    server: str, path: str, expected: int
) -> None:
    async with (
        new_session(allow_private=True) as session,
        session.post(server + path, data=b"{}") as response,
    ):
        body = await _read_capped(response)
    assert len(body) == expected
