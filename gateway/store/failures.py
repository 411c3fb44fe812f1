"""Redis failures a client should hear about as such, not as an internal error."""

from __future__ import annotations

from redis.exceptions import (
    ClusterDownError,
    ConnectionError,
    OutOfMemoryError,
    ResponseError,
    SlotNotCoveredError,
    TimeoutError,
    TryAgainError,
)

from gateway.errors import GatewayError, Unavailable


def as_gateway_error(exc: BaseException) -> GatewayError | None:
    """The client-facing error for a Redis failure, or None when it is not one."""
    if isinstance(exc, OutOfMemoryError) or (
        isinstance(exc, ResponseError) and str(exc).startswith("OOM")
    ):
        return Unavailable("the gateway's Redis is out of memory; nothing was stored", 30)
    if isinstance(exc, ConnectionError | TimeoutError):
        return Unavailable("the gateway cannot reach its Redis; nothing was stored", 5)
    # A Redis Cluster between losing a primary and promoting its replica (CLUSTERDOWN, or no
    # node for the slot), or moving a slot (TRYAGAIN): redis-py retried for about a second.
    if isinstance(exc, ClusterDownError | SlotNotCoveredError | TryAgainError):
        return Unavailable("the gateway's Redis Cluster is failing over; nothing was stored", 1)
    return None
