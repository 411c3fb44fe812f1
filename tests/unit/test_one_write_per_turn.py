"""uvicorn writes a response's head and body apart; the gateway's TCP server sends the writes
of one turn of the loop as one (gateway/serving/tcp_server.py)."""

from __future__ import annotations

import asyncio
from typing import Any

from gateway.serving.tcp_server import _OneWritePerTurn


class Recorded:
    def __init__(self) -> None:
        self.calls: list[Any] = []
        self.closing = False

    def write(self, data: bytes) -> None:
        self.calls.append(data)

    def close(self) -> None:
        self.calls.append("close")
        self.closing = True

    def abort(self) -> None:
        self.calls.append("abort")
        self.closing = True

    def is_closing(self) -> bool:
        return self.closing

    def get_extra_info(self, name: str) -> str:
        return f"info {name}"


async def test_writes_of_one_turn_go_out_as_one_in_order() -> None:
    recorded = Recorded()
    transport = _OneWritePerTurn(recorded, asyncio.get_running_loop())  # type: ignore[arg-type]
    transport.write(b"HTTP/1.1 201 Created\r\n\r\n")
    transport.write(bytearray(b"{}"))
    assert recorded.calls == []
    await asyncio.sleep(0)
    assert recorded.calls == [b"HTTP/1.1 201 Created\r\n\r\n{}"]
    transport.write(b"next")
    await asyncio.sleep(0)
    assert recorded.calls[1:] == [b"next"]
    assert transport.get_extra_info("peername") == "info peername"


async def test_closing_sends_what_is_kept_first_and_nothing_after() -> None:
    recorded = Recorded()
    transport = _OneWritePerTurn(recorded, asyncio.get_running_loop())  # type: ignore[arg-type]
    transport.write(b"answer")
    transport.close()
    assert recorded.calls == [b"answer", "close"]
    transport.write(b"late")
    await asyncio.sleep(0)
    assert recorded.calls == [b"answer", "close"]


async def test_aborting_drops_what_is_kept() -> None:
    recorded = Recorded()
    transport = _OneWritePerTurn(recorded, asyncio.get_running_loop())  # type: ignore[arg-type]
    transport.write(b"answer")
    transport.abort()
    await asyncio.sleep(0)
    assert recorded.calls == ["abort"]
