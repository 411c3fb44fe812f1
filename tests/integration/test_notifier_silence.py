"""The Notifier's pub/sub connection going silent without an error (a partition, a NAT that
forgot the flow): a proxy between it and Redis stops passing bytes and keeps the sockets open.
The reader's PING gets no answer, so it takes the connection for dead and subscribes again on a
new one, and wake-ups arrive again; the old connection is not waited on for ever."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

from redis.asyncio import Redis

from gateway.store import keys
from gateway.store.pubsub import Notifier
from tests.support import until

PING_EVERY = 0.3
PONG_WITHIN = 1.5  # a PONG on loopback takes microseconds; this is room for a loaded machine


class Blackhole:
    """A TCP proxy to Redis whose connections open so far can be made to swallow everything,
    both ways, without closing: what a dead path looks like to both ends."""

    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self._silenced: list[asyncio.Event] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0

    def silence(self) -> None:
        """Every connection made until now passes nothing from here on."""
        for event in self._silenced:
            event.set()

    async def _pipe(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, silent: asyncio.Event
    ) -> None:
        try:
            while data := await reader.read(65536):
                if not silent.is_set():
                    writer.write(data)
                    await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()  # one end gone: the other is closed too, as a real path would

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection(*self._target)
        silent = asyncio.Event()
        self._silenced.append(silent)
        for pipe in (
            self._pipe(reader, upstream_writer, silent),
            self._pipe(upstream_reader, writer, silent),
        ):
            task = asyncio.create_task(pipe)
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Blackhole]:
        server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        try:
            yield self
        finally:
            server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)


async def test_a_silent_pubsub_connection_is_replaced(redis_url: str) -> None:
    target = urlsplit(redis_url)
    assert target.hostname is not None
    assert target.port is not None
    async with (
        Blackhole(target.hostname, target.port).running() as proxy,
        Redis.from_url(redis_url, decode_responses=True) as direct,
        Redis(host="127.0.0.1", port=proxy.port, decode_responses=True) as through_proxy,
    ):
        woken: list[str] = []
        reconnects: list[None] = []
        notifier = Notifier(
            through_proxy,
            on_wake=lambda queue, _: woken.append(queue),
            on_reconnect=lambda: reconnects.append(None),
            ping_every=PING_EVERY,
            pong_within=PONG_WITHIN,
        )
        await notifier.start()
        try:
            await direct.publish(keys.WAKE_CHANNEL, "before")
            await until(lambda: woken == ["before"], what="the wake before the silence")
            # Quiet PING rounds on a live connection answer in time: no reconnect. (A check
            # that nothing happens, so it waits out a fixed span: three rounds and a deadline.)
            await asyncio.sleep(3 * PING_EVERY + PONG_WITHIN)
            assert reconnects == []

            proxy.silence()
            await until(lambda: bool(reconnects), what="the notifier to replace the silent one")
            assert len(reconnects) == 1

            async def heard_again() -> bool:
                # Published until heard: the new connection's SUBSCRIBE may still be on its way.
                if "after" not in woken:
                    await direct.publish(keys.WAKE_CHANNEL, "after")
                return "after" in woken

            await until(heard_again, what="a wake on the new connection")
            assert woken[0] == "before"
        finally:
            await notifier.stop()
