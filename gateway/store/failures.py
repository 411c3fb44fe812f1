"""Redis failures a client should hear about as such, not as an internal error."""

from __future__ import annotations

from redis.exceptions import (
    ClusterError,
    ConnectionError,
    OutOfMemoryError,
    RedisClusterException,
    ResponseError,
    SlotNotCoveredError,
    TimeoutError,
    TryAgainError,
)

from gateway.core.errors import GatewayError, Unavailable

UNREACHABLE = (
    "the gateway cannot reach its {}; the request may or may not have taken effect: send it "
    "again (with the same task id, dedup_key or Idempotency-Key, a repeat is stored once)"
)


def as_gateway_error(exc: BaseException) -> GatewayError | None:
    """The client-facing error for a Redis failure, or None when it is not one."""
    if isinstance(exc, OutOfMemoryError) or (
        isinstance(exc, ResponseError) and str(exc).startswith("OOM")
    ):
        return Unavailable("the gateway's Redis is out of memory; nothing was stored", 30)
    # A connection lost or a reply late mid-command: the command may have run (a timeout, a
    # server that died after running it), so the answer does not say that nothing was stored.
    if isinstance(exc, ConnectionError | TimeoutError):
        return Unavailable(UNREACHABLE.format("Redis"), 5)
    # A Redis Cluster between losing a primary and promoting its replica (CLUSTERDOWN, or no
    # node for the slot), or moving a slot (TRYAGAIN; or redirected more times than redis-py
    # follows, its ClusterError "TTL exhausted"): redis-py retried for about a second.
    if isinstance(exc, ClusterError | SlotNotCoveredError | TryAgainError):
        return Unavailable("the gateway's Redis Cluster is failing over; nothing was stored", 1)
    # The cluster client could reach no node to re-read the slot map from: redis-py raises
    # RedisClusterException (not a RedisError) from the last node's connection error.
    if isinstance(exc, RedisClusterException) and isinstance(
        exc.__cause__, ConnectionError | TimeoutError
    ):
        return Unavailable(UNREACHABLE.format("Redis Cluster"), 5)
    return None
