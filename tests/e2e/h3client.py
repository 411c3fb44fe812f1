"""A minimal HTTP/3 client on aioquic, for the tests: one QUIC connection, requests answered
whole (status, headers, body). aioquic ships no high-level client, only the connection layers
this puts together (as its examples do)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aioquic.asyncio.client import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import QuicEvent


@dataclass
class H3Response:
    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""


class H3Client(QuicConnectionProtocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._http = H3Connection(self._quic)
        self._pending: dict[int, tuple[H3Response, asyncio.Future[H3Response]]] = {}
        self.authority = b""

    def quic_event_received(self, event: QuicEvent) -> None:
        for h3 in self._http.handle_event(event):
            if not isinstance(h3, HeadersReceived | DataReceived):
                continue
            found = self._pending.get(h3.stream_id)
            if found is None:
                continue
            response, done = found
            if isinstance(h3, HeadersReceived):
                for name, value in h3.headers:
                    if name == b":status":
                        response.status = int(value)
                    else:
                        response.headers[name.decode()] = value.decode()
            else:
                response.body += h3.data
            if h3.stream_ended and not done.done():
                done.set_result(response)

    async def request(
        self,
        method: str,
        path: str,
        headers: dict[str, str] | None = None,
        body: bytes = b"",
    ) -> H3Response:
        stream = self._quic.get_next_available_stream_id()
        sent = [
            (b":method", method.encode()),
            (b":scheme", b"https"),
            (b":authority", self.authority),
            (b":path", path.encode()),
            *((k.lower().encode(), v.encode()) for k, v in (headers or {}).items()),
        ]
        done: asyncio.Future[H3Response] = asyncio.get_running_loop().create_future()
        self._pending[stream] = (H3Response(), done)
        self._http.send_headers(stream, sent, end_stream=not body)
        if body:
            self._http.send_data(stream, body, end_stream=True)
        self.transmit()
        try:
            return await asyncio.wait_for(done, 10)
        finally:
            del self._pending[stream]


@asynccontextmanager
async def h3_client(host: str, port: int, ca: Path) -> AsyncIterator[H3Client]:
    """A connection to ``host:port`` over QUIC, trusting the certificate ``ca``."""
    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, server_name="localhost")
    config.load_verify_locations(str(ca))
    async with connect(host, port, configuration=config, create_protocol=H3Client) as client:
        assert isinstance(client, H3Client)
        client.authority = f"localhost:{port}".encode()
        yield client
