"""Connecting to Redis, and refusing one that would silently lose tasks."""

from __future__ import annotations

import logging

from redis.asyncio import BlockingConnectionPool, Redis
from redis.exceptions import ResponseError

from gateway.store.cluster import connect_cluster, is_cluster_url
from gateway.store.sentinel import is_sentinel_url, sentinel_client
from gateway.store.stale import STALE_RETRY, pool_options, stale_aware

log = logging.getLogger(__name__)


class UnsafeRedis(Exception):
    """The Redis server is configured in a way that would lose tasks."""


MAX_CONNECTIONS = 64
POOL_TIMEOUT = 10.0
# How long one Redis command may take (connecting, writing, reading its reply) before it fails
# with redis-py's TimeoutError, which a request answers as 503 with Retry-After, rather than
# waiting for a Redis that stopped answering without closing its connections (stopped,
# partitioned, a host gone). Set here, not left to redis-py: its default is 5 s since 8.0 and
# none before (pyproject.toml allows 5.0), and 8.0's 5 s cut a WAIT longer than that short.
REDIS_TIMEOUT = 5.0


async def server_time_ms(redis: Redis) -> float:
    """The Redis server's clock, in milliseconds since the epoch."""
    seconds, micros = await redis.time()
    return float(seconds * 1000 + micros / 1000)


async def connect(url: str, timeout: float = REDIS_TIMEOUT, wait: float = 0.0) -> Redis:
    """A client for ``url``, after checking the server does not evict keys.

    Every command fails after ``timeout`` seconds without an answer (connecting, and each
    reply), plus ``wait`` for a reply: the longest a command may rightly take (``WAIT``'s
    timeout). Pub/sub's blocking read is not bounded (redis-py reads it without a deadline).

    The pool blocks for a free connection (up to ``POOL_TIMEOUT``) instead of failing when all
    ``MAX_CONNECTIONS`` are busy: a burst of requests queues briefly rather than erroring.
    A connection Redis closed (it restarted) is opened again as the pool lends it, and a command
    that met one all the same is sent again at once on a new connection (:mod:`.stale`).
    A ``redis+cluster://`` URL connects to a Redis Cluster instead (:mod:`.cluster`), and a
    ``redis+sentinel://`` URL finds the primary through Sentinel (:mod:`.sentinel`).
    """
    if is_cluster_url(url):
        cluster, evicting = await connect_cluster(url, timeout)
        if evicting:
            await cluster.aclose()
            raise UnsafeRedis(
                f"Redis Cluster primaries evict keys, which would lose tasks ({', '.join(evicting)}"
                "); set maxmemory-policy to 'noeviction' on every node"
            )
        return cluster
    options = {
        "decode_responses": True,
        "health_check_interval": 30,
        "max_connections": MAX_CONNECTIONS,
        "timeout": POOL_TIMEOUT,
        "socket_timeout": timeout + wait,
        "socket_connect_timeout": timeout,
        "retry": STALE_RETRY,
        **pool_options(),
    }
    if is_sentinel_url(url):
        redis = sentinel_client(url, **options)
    else:
        redis = Redis.from_pool(BlockingConnectionPool.from_url(url, **options))
    pool = redis.connection_pool  # TCP, TLS, a Unix socket or Sentinel's: known once it is made
    pool.connection_class = stale_aware(pool.connection_class)
    try:
        policy = (await redis.config_get("maxmemory-policy")).get("maxmemory-policy")
    except ResponseError:
        log.warning("cannot read maxmemory-policy (CONFIG is disabled); make sure it is noeviction")
        return redis
    except Exception:
        await redis.aclose()
        raise
    if policy != "noeviction":
        await redis.aclose()
        raise UnsafeRedis(
            f"Redis at {url} has maxmemory-policy '{policy}', which evicts keys and would lose "
            "tasks; set it to 'noeviction' (CONFIG SET maxmemory-policy noeviction)"
        )
    return redis
