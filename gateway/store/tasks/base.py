"""What every part of the task store shares: the Redis client and the loaded scripts."""

from __future__ import annotations

from collections.abc import Sequence

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import NoScriptError

from gateway.store.coalescing import Coalescer
from gateway.store.replication import NO_WAIT, Durability
from gateway.store.scripts import Arg, Reply, ScriptName, Scripts


class StoreBase:
    """The Redis client (decoding responses), the scripts every task state change calls, how
    many replicas must confirm an enqueue, the round trips enqueues share (a single Redis or
    Sentinel; a cluster routes each command by its key, through redis-py), and this gateway's
    name in the wake messages of its enqueues (``origin``; :class:`gateway.store.pubsub.Notifier`
    tells its own apart). Finishes that carry a claim share round trips too, without waiting
    for replicas (``_sharing``): a finish never did."""

    def __init__(
        self,
        redis: Redis,
        scripts: Scripts,
        *,
        durability: Durability = NO_WAIT,
        origin: str = "",
    ) -> None:
        self._redis = redis
        self._scripts = scripts
        self._durability = durability
        self._cluster = isinstance(redis, RedisCluster)
        self._coalescer = None if self._cluster else Coalescer(redis, durability)
        self._sharing = None if self._cluster else Coalescer(redis)
        self._origin = origin

    async def call_confirmed(
        self, name: ScriptName, script_keys: Sequence[str], args: Sequence[Arg], outcome: str
    ) -> Reply:
        """Run a script, and when replicas must confirm (``wait_replicas``) follow it with
        ``WAIT`` on the connection that ran it: raises NotReplicated, its detail ending with
        ``outcome``, when fewer confirmed in time (the primary holds the change; a failover
        now could lose it). Without replicas to confirm, the script alone, as
        :meth:`Scripts.call`."""
        if not self._durability.waits:
            return await self._scripts.call(name, script_keys, args)
        sha = self._scripts.sha(name)
        for _ in range(2):
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.evalsha(sha, len(script_keys), *script_keys, *args)
                pipe.execute_command(*self._durability.wait_command())
                reply, confirmed = await pipe.execute(raise_on_error=False)
            if not isinstance(reply, NoScriptError):
                break
            await self._scripts.load()  # Redis restarted or failed over: load, run again
        for answer in (reply, confirmed):
            if isinstance(answer, Exception):
                raise answer
        self._durability.confirm(int(confirmed), outcome)
        return await self._scripts.unwrap(name, script_keys, reply)
