"""Redis pub/sub for the gateway: wake dispatchers on new work, the recoverer on an earlier due
time, and long-polls on finish.

One pub/sub connection per gateway process. ``jg:wake`` carries queue names that got ready work
(published by the enqueue and promote scripts, possibly from another gateway), followed by a
space and how many tasks became ready when the publisher knows (the enqueue script does), and
by the name of the gateway whose enqueue or dispatcher's finish published it (``origin``): that
gateway's own message goes to ``on_own_wake`` (its dispatcher was woken, or claimed, by the
enqueue or on the finish's answer itself);
``jg:due:wake`` carries a due time that became the earliest of the due index; ``jg:changed``
carries a queue whose policy or endpoints changed (:meth:`Notifier.changed`, so every gateway
forgets its cached view and its paused or idle dispatcher loop looks again at once);
``jg:done:<id>`` is published when a task ends, and subscribed only while someone waits for
that task.

Messages sent while the connection is broken are lost, so once it is back ``on_reconnect`` is
called: the gateway then wakes every dispatcher loop, every waiting pull poll, its recoverer,
and its completion callback and job firing loops once.

A connection can also die without a word: a partition, a NAT or load balancer that forgets an
idle flow, a failover that moves the address. Nothing then arrives, not even an error, and a
read without a deadline would wait for ever, every wake-up lost. So the reader waits at most
``ping_every`` seconds for a message; after that much silence it sends a ``PING`` on the
subscribed connection, and a connection whose ``PONG`` (or any message) has not come within
``pong_within`` seconds is taken for broken and replaced, as after an error.

After a break the connection is made anew through the client, not retried on the same node: on
a Redis Cluster the pub/sub connection is on one node (the one serving ``jg:wake``'s slot when it
connects), and that node may be gone for good (killed, its replica promoted). The first new
connection goes to the node the client's slot map names now, the next ones to each node of the
cluster in turn; any node will do, as a PUBLISH on one reaches the subscribers of every node.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.client import PubSub
from redis.asyncio.cluster import RedisCluster

from gateway.store import keys

log = logging.getLogger(__name__)

PING_EVERY = 15.0
"""Seconds of silence on the pub/sub connection before the reader asks Redis whether it is
still there (module docstring)."""
PONG_WITHIN = 5.0
"""Seconds the answer to that ``PING`` may take before the connection is taken for dead."""
PING_MESSAGE = "jobgate-pubsub-alive"


class SilentConnection(ConnectionError):
    """The pub/sub connection answered neither a message nor a ``PING`` in time."""


CHANNELS = (
    keys.WAKE_CHANNEL,
    keys.DUE_CHANNEL,
    keys.NOTICE_CHANNEL,
    keys.JOBS_CHANNEL,
    keys.CHANGED_CHANNEL,
)


class Notifier:
    def __init__(
        self,
        redis: Redis,
        on_wake: Callable[[str, int | None], None],
        *,
        on_due: Callable[[int], None] = lambda due_ms: None,
        on_notice: Callable[[int], None] = lambda due_ms: None,
        on_job: Callable[[int], None] = lambda due_ms: None,
        on_reconnect: Callable[[], None] = lambda: None,
        on_change: Callable[[str], None] = lambda queue: None,
        origin: str = "",
        on_own_wake: Callable[[str, int | None], None] | None = None,
        ping_every: float = PING_EVERY,
        pong_within: float = PONG_WITHIN,
    ) -> None:
        self._redis = redis
        self._ping_every = ping_every
        self._pong_within = pong_within
        self._on_wake = on_wake
        self._origin = origin
        self._on_own_wake = on_own_wake or on_wake
        self._on_change = on_change
        self._publishing: set[asyncio.Task[None]] = set()
        self._on_due = on_due
        self._on_notice = on_notice
        self._on_job = on_job
        self._on_reconnect = on_reconnect
        self._pubsub: PubSub | None = None
        self._reader: asyncio.Task[None] | None = None
        self._waiters: defaultdict[str, set[asyncio.Event]] = defaultdict(set)
        self._ready = asyncio.Event()

    async def start(self) -> None:
        self._pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
        await self._pubsub.subscribe(*CHANNELS)
        self._reader = asyncio.create_task(self._read(), name="jobgate-notifier")

    async def _reopen(self, tries: int) -> None:
        """Replace the broken connection with a new one subscribed to every channel, the
        ``jg:done:<id>`` ones watched now included (module docstring: which node)."""
        old = self._pubsub
        if tries > 1 and isinstance(self._redis, RedisCluster):
            nodes = self._redis.get_nodes()
            node = nodes[tries % len(nodes)]
            self._pubsub = self._redis.pubsub(node=node, ignore_subscribe_messages=True)
        else:
            self._pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
        if old is not None:
            with contextlib.suppress(Exception):
                await old.aclose()  # type: ignore[no-untyped-call]
        await self._pubsub.subscribe(*CHANNELS, *map(keys.done_channel, list(self._waiters)))

    def changed(self, queue: str) -> None:
        """Tell every gateway (this one included) that ``queue`` changed. Sent in the
        background: a change that is not heard is picked up by the caches' expiry and the
        dispatchers' safety tick, as before there was this channel."""
        publish = asyncio.create_task(self._publish_change(queue), name=f"changed:{queue}")
        self._publishing.add(publish)
        publish.add_done_callback(self._publishing.discard)

    async def _publish_change(self, queue: str) -> None:
        try:
            await self._redis.publish(keys.CHANGED_CHANNEL, queue)
        except Exception as e:
            log.warning("telling other gateways that queue %s changed failed: %s", queue, e)

    async def stop(self) -> None:
        for publish in list(self._publishing):
            publish.cancel()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        if self._pubsub is not None:
            await self._pubsub.aclose()  # type: ignore[no-untyped-call]

    @contextlib.asynccontextmanager
    async def watch(self, task_id: str) -> AsyncIterator[asyncio.Event]:
        """An event set when the task ends. Subscribe first, then read the task's state, so an
        end between the two is not missed."""
        assert self._pubsub is not None, "Notifier.start() first"
        event = asyncio.Event()
        channel = keys.done_channel(task_id)
        first = not self._waiters[task_id]
        self._waiters[task_id].add(event)
        try:
            if first:
                await self._pubsub.subscribe(channel)
            yield event
        finally:
            self._waiters[task_id].discard(event)
            if not self._waiters[task_id]:
                del self._waiters[task_id]
                with contextlib.suppress(Exception):
                    await self._pubsub.unsubscribe(channel)

    async def _read(self) -> None:
        tries = 0  # failures in a row
        loop = asyncio.get_running_loop()
        heard = loop.time()  # when the connection last said anything
        pinged: float | None = None  # when the PING not yet answered went out
        while True:
            try:
                if tries:
                    await self._reopen(tries)
                    heard, pinged = loop.time(), None
                assert self._pubsub is not None
                if pinged is None:
                    wait = heard + self._ping_every - loop.time()
                else:
                    wait = pinged + self._pong_within - loop.time()
                # parse_response and handle_message are get_message in two: the raw reply
                # says that the connection spoke, whatever handle_message makes of it (the
                # answer to a PING in RESP3 is a plain string it turns into nothing).
                response = await self._pubsub.parse_response(block=False, timeout=max(wait, 0.0))
                now = loop.time()
                if response is not None:
                    heard, pinged = now, None
                    message: dict[str, Any] | None = await self._pubsub.handle_message(  # type: ignore[no-untyped-call]
                        response
                    )
                else:
                    # Nothing within the wait, or a reply redis-py keeps to itself (its own
                    # health check's PONG): the clock says which.
                    message = None
                    if pinged is not None and now - pinged >= self._pong_within:
                        raise SilentConnection(
                            f"no answer to PING on the pub/sub connection in {self._pong_within} s"
                        )
                    if pinged is None and now - heard >= self._ping_every:
                        await self._pubsub.ping(PING_MESSAGE)
                        pinged = now
            except asyncio.CancelledError:
                raise
            except SilentConnection as e:
                log.warning("%s; reconnecting", e)
                tries += 1
                await asyncio.sleep(1)
                continue
            except Exception:
                log.exception("pub/sub connection failed; reconnecting")
                tries += 1
                await asyncio.sleep(1)
                continue
            if tries:
                # Back, subscribed again: what was published meanwhile is lost.
                tries = 0
                self._on_reconnect()
            if message is None or message["type"] == "pong":
                continue
            channel = message["channel"]
            if channel == keys.WAKE_CHANNEL:
                queue, ready, origin = _wake_message(message["data"])
                own = origin == self._origin and origin != ""
                (self._on_own_wake if own else self._on_wake)(queue, ready)
            elif channel == keys.CHANGED_CHANNEL:
                self._on_change(message["data"])
            elif channel in (keys.DUE_CHANNEL, keys.NOTICE_CHANNEL, keys.JOBS_CHANNEL):
                try:
                    due_ms = int(message["data"])
                except ValueError:
                    log.warning("ignoring a malformed due time on %s", channel)
                    continue
                {
                    keys.DUE_CHANNEL: self._on_due,
                    keys.NOTICE_CHANNEL: self._on_notice,
                    keys.JOBS_CHANNEL: self._on_job,
                }[channel](due_ms)
            elif channel.startswith(keys.DONE_CHANNEL_PREFIX):
                for event in self._waiters.get(channel.removeprefix(keys.DONE_CHANNEL_PREFIX), ()):
                    event.set()


def _wake_message(data: str) -> tuple[str, int | None, str]:
    """A ``jg:wake`` message's queue, how many tasks became ready if it says, and the gateway
    whose enqueue sent it if it says."""
    queue, _, rest = data.partition(" ")
    ready, _, origin = rest.partition(" ")
    return queue, int(ready) if ready.isdigit() else None, origin
