"""Queues at a glance, for the admin UI's queues page: the names of every queue, and for the
queues in view, whether each is paused, its tasks in each state and its finished tasks per
time window.

A row is one read-only script call (``lua/overview.lua``) whose reply is a few integers, and a
page of rows is one pipeline of them: with a few commands per queue instead of about fifty, the
gateway's cost of a page is the cost of its rows, whatever the number of queues.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import NoScriptError

from gateway.store import keys
from gateway.store.keys import FINISHED_STATES
from gateway.store.scripts import Scripts
from sdk.wire import TaskState

COUNTED_STATES: tuple[TaskState, ...] = (
    TaskState.SCHEDULED,
    TaskState.WAITING,
    TaskState.QUEUED,
    TaskState.RUNNING,
    *FINISHED_STATES,
)
"""The states whose sizes a row holds, in the order ``overview.lua`` answers them."""


@dataclass(frozen=True, slots=True)
class QueueGlance:
    """One queue's row: paused or not, tasks per state, and (when windows were asked for)
    tasks that ended in each finished state per window, oldest first."""

    name: str
    paused: bool
    counts: dict[TaskState, int]
    finished: dict[TaskState, list[int]]


def _keys(name: str) -> list[str]:
    return [keys.queue_hash(name)] + [keys.state_index(name, s) for s in COUNTED_STATES]


def _glance(name: str, reply: list[int], windows: int) -> QueueGlance | None:
    if reply[0] < 0:
        return None  # deleted since its name was read
    sizes = reply[1 : 1 + len(COUNTED_STATES)]
    rest = reply[1 + len(COUNTED_STATES) :]
    return QueueGlance(
        name=name,
        paused=reply[0] == 1,
        counts=dict(zip(COUNTED_STATES, (int(n) for n in sizes), strict=True)),
        finished={
            s: [int(n) for n in rest[i * windows : (i + 1) * windows]]
            for i, s in enumerate(FINISHED_STATES)
        },
    )


async def index_sizes(redis: Redis, scripts: Scripts, indexes: Sequence[str]) -> list[int]:
    """The sizes of sorted sets of any queues, in order: one script call on a single Redis
    (``lua/sizes.lua``), a pipeline of ZCARDs on a Redis Cluster (which refuses a script over
    several slots). Either way one round trip; the script is the cheaper by far for the gateway
    (a thousand commands pipelined cost it about 11 ms, one command with a thousand keys about
    1 ms)."""
    if not indexes:
        return []
    if isinstance(redis, RedisCluster):
        async with redis.pipeline(transaction=False) as pipe:
            for index in indexes:
                pipe.zcard(index)
            return [int(n) for n in await pipe.execute()]
    return [int(n) for n in await scripts.call("sizes", indexes, [])]


class OverviewStore:
    def __init__(self, redis: Redis, scripts: Scripts) -> None:
        self._redis = redis
        self._scripts = scripts

    async def names(self) -> list[str]:
        """Every registered queue's name, in no particular order (one SMEMBERS)."""
        return list(cast(set[str], await self._redis.smembers(keys.QUEUES)))

    async def sizes(self, names: Sequence[str], state: TaskState) -> list[int]:
        """How many tasks each queue named holds in ``state``, in order (one round trip)."""
        return await index_sizes(
            self._redis, self._scripts, [keys.state_index(n, state) for n in names]
        )

    async def glance(self, names: Sequence[str], edges: Sequence[int]) -> list[QueueGlance]:
        """The rows of the queues named, in their order (a queue deleted meanwhile is left
        out); with window ``edges`` (ms, oldest first), their finished tasks per window."""
        if not names:
            return []
        replies = await self._pipeline(names, edges)
        if any(isinstance(r, NoScriptError) for r in replies):
            await self._scripts.load()  # Redis restarted or failed over: once more, loaded
            replies = await self._pipeline(names, edges)
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        windows = max(len(edges) - 1, 0)
        found = (_glance(n, r, windows) for n, r in zip(names, replies, strict=True))
        return [g for g in found if g is not None]

    async def _pipeline(self, names: Sequence[str], edges: Sequence[int]) -> list[Any]:
        sha = self._scripts.sha("overview")
        async with self._redis.pipeline(transaction=False) as pipe:
            for name in names:
                # EVALSHA through execute_command: redis-py's cluster pipeline refuses
                # pipe.evalsha() but routes the command by its first key all the same.
                pipe.execute_command("EVALSHA", sha, 9, *_keys(name), *edges)
            replies: list[Any] = await pipe.execute(raise_on_error=False)
            return replies
