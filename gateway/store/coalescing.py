"""Round trips shared by concurrent callers: their commands go out in one write on one connection.

::

    coalescer = Coalescer(redis)                        # a single Redis or Sentinel, not Cluster
    replies = await coalescer.run([("SET", k, v), ("EVALSHA", sha, 1, key, arg)])

Each caller's commands stay together and in order, and so do the callers: those that call in
the same turn of the event loop share a write, one connection from the pool and its reads. A
reply that is a Redis error comes back as the exception (as a pipeline's
``raise_on_error=False`` does); a connection failure is raised to every caller of that round
trip, with nothing re-sent: the caller decides (the enqueue re-sends through redis-py's own
pipeline), except on a connection Redis had closed before the write (kept from before a
restart): nothing of it ran, and the round trip goes again at once on a new connection
(:mod:`gateway.store.stale`). With replicas to confirm (``durability``), one ``WAIT`` follows each
shared write on its connection, which covers every write of that connection before it, and
each caller gets its answer as its last reply.

Why: with 64 enqueues in flight, redis-py gave each its own connection, write and reads;
sharing them cut the gateway's CPU per enqueue by a third (480 to 325 µs on a loaded machine;
bench/RESULTS.md, "Gateway CPU per enqueue"). The reads happen in a task of their own, so a
caller that is cancelled leaves the connection in step (its replies are read and dropped).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.sentinel import SentinelConnectionPool
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from gateway.store.replication import NO_WAIT, Durability
from gateway.store.stale import STALE_RETRY


@dataclass(frozen=True, slots=True)
class Packed:
    """Words of a command packed once, to be sent many times (a queue's key names)."""

    words: tuple[str, ...]
    resp: bytes

    @classmethod
    def of(cls, words: Iterable[str]) -> Packed:
        words = tuple(words)
        return cls(words, b"".join(_bulk(w.encode()) for w in words))


Word = str | int | float | bytes | Packed
Command = Sequence[Word]
Batch = list[tuple[Sequence[Command], "asyncio.Future[list[Any]]"]]


class Coalescer:
    """Sends the commands of callers in the same turn of the loop in one round trip."""

    def __init__(self, redis: Redis, durability: Durability = NO_WAIT) -> None:
        self._redis = redis
        self._durability = durability
        self._waiting: Batch = []
        self._sending: set[asyncio.Task[None]] = set()
        self._kept: Any = None  # the last round trip's connection, for the next (_connection)
        # Not under Sentinel: its pool disconnects the idle connections when the primary
        # changes, which a kept one (lent) would miss.
        self._keeps = not isinstance(redis.connection_pool, SentinelConnectionPool)

    async def run(self, commands: Sequence[Command]) -> list[Any]:
        """The replies to ``commands`` (errors as exceptions), and WAIT's answer last when
        replicas must confirm. Raises what the connection raised when it failed."""
        loop = asyncio.get_running_loop()
        if not self._waiting:
            # The write's task at once: its first step, a turn of the loop from now, takes the
            # callers that came until then. (A callback that then made the task took a second
            # turn, for the same callers: the task's first step waited behind the whole turn.)
            task = loop.create_task(self._flush())
            self._sending.add(task)
            task.add_done_callback(self._sending.discard)
        future: asyncio.Future[list[Any]] = loop.create_future()
        self._waiting.append((commands, future))
        return await future

    async def _flush(self) -> None:
        batch, self._waiting = self._waiting, []
        await self._send(batch)

    async def _send(self, batch: Batch) -> None:
        try:
            connection = await self._connection()
        except BaseException as e:
            _fail(batch, e)
            if not isinstance(e, Exception):
                raise
            return
        try:
            # A connection Redis closed before this write (kept from before a restart) fails
            # as StaleConnection, having run nothing: sent again at once on a new connection.
            replies = await STALE_RETRY.call_with_retry(
                lambda: self._exchange(connection, batch),
                lambda _: connection.disconnect(nowait=True),
            )
        except TimeoutError:  # asyncio's: what redis-py raises for a read that timed out
            await connection.disconnect(nowait=True)
            _fail(batch, RedisTimeoutError("Timeout reading from Redis"))
        except BaseException as e:
            await connection.disconnect(nowait=True)  # replies may be left unread
            _fail(batch, e)
            if not isinstance(e, Exception):
                raise
        else:
            for (_, future), each in zip(batch, replies, strict=True):
                if not future.done():  # else the caller was cancelled: its replies are dropped
                    future.set_result(each)
        finally:
            await self._done_with(connection)

    async def _exchange(self, connection: Any, batch: Batch) -> list[list[Any]]:
        """The batch's commands in one write, then their replies (WAIT's after each's)."""
        words = [command for commands, _ in batch for command in commands]
        if self._durability.waits:
            words.append(self._durability.wait_command())
        await connection.send_packed_command(pack(words))
        # One deadline for all the replies, not one per reply (a third of their reading).
        async with asyncio.timeout(connection.socket_timeout):
            replies = [[await _reply(connection) for _ in commands] for commands, _ in batch]
            if self._durability.waits:
                confirmed = await _reply(connection)
                for each in replies:
                    each.append(confirmed)
        return replies

    async def _connection(self) -> Any:
        """The connection of a round trip: the one kept from the last, checked as the pool
        checks those it lends (unread data or a close from the server: connected again, by
        ``send_packed_command``), else one from the pool. Lending and taking back one through
        the pool cost about 46 µs (its lock, a timeout, its wait, its telemetry hooks):
        bench/RESULTS.md, "Enqueue to start, round 2"."""
        connection, self._kept = self._kept, None
        if connection is None:
            pool = self._redis.connection_pool
            return await pool.get_connection()  # type: ignore[no-untyped-call]
        try:
            dirty = connection.is_connected and await connection.can_read()
        except Exception:  # the socket failed (it is disconnected): connected again too
            dirty = True
        if dirty:
            await connection.disconnect(nowait=True)
        return connection

    async def _done_with(self, connection: Any) -> None:
        """Keep one connection for the next round trip (it stays lent: the pool's ``aclose``
        disconnects it with the rest); give the others back. A broken one goes back."""
        if (
            self._keeps
            and self._kept is None
            and connection.is_connected
            and not connection.should_reconnect()
        ):
            self._kept = connection
        else:
            await self._redis.connection_pool.release(connection)


async def _reply(connection: Any) -> Any:
    try:
        return await connection.read_response(timeout=math.inf)  # under the round trip's
    except ResponseError as e:  # a reply, not a broken connection
        return e


def _fail(batch: Batch, e: BaseException) -> None:
    for _, future in batch:
        if future.done():
            continue
        if isinstance(e, Exception):
            future.set_exception(e)
        else:  # this task was cancelled (the loop is closing): so are its callers
            future.cancel()


def pack(commands: Iterable[Command]) -> bytes:
    """``commands`` in RESP, as Redis reads them (redis-py's own packing took 2.5x as long)."""
    out = []
    for command in commands:
        count = len(command)
        parts = []
        for word in command:
            if isinstance(word, str):
                parts.append(_bulk(word.encode()))
            elif isinstance(word, Packed):
                parts.append(word.resp)
                count += len(word.words) - 1
            elif isinstance(word, bytes):
                parts.append(_bulk(word))
            elif isinstance(word, int):
                parts.append(_bulk(b"%d" % word))
            else:
                parts.append(_bulk(repr(word).encode()))
        out.append(b"*%d\r\n" % count)
        out += parts
    return b"".join(out)


def unpacked(command: Command) -> list[str | int | float | bytes]:
    """The words of ``command``, a :class:`Packed` as its words again (for redis-py)."""
    words: list[str | int | float | bytes] = []
    for word in command:
        if isinstance(word, Packed):
            words += word.words
        else:
            words.append(word)
    return words


def _bulk(word: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(word), word)
