"""Redis failures a client should hear about as such, not as an internal error."""

from __future__ import annotations

from redis.exceptions import ConnectionError, OutOfMemoryError, ResponseError, TimeoutError

from gateway.errors import GatewayError, Unavailable


def as_gateway_error(exc: BaseException) -> GatewayError | None:
    """The client-facing error for a Redis failure, or None when it is not one."""
    if isinstance(exc, OutOfMemoryError) or (
        isinstance(exc, ResponseError) and str(exc).startswith("OOM")
    ):
        return Unavailable("the gateway's Redis is out of memory; nothing was stored", 30)
    if isinstance(exc, ConnectionError | TimeoutError):
        return Unavailable("the gateway cannot reach its Redis; nothing was stored", 5)
    return None
