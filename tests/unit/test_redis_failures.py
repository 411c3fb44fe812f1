"""Which Redis failures a client hears as 503 (with how long to wait), not as a 500."""

from __future__ import annotations

import pytest
from redis.exceptions import (
    ClusterDownError,
    ClusterError,
    ConnectionError,
    MasterDownError,
    OutOfMemoryError,
    RedisClusterException,
    ResponseError,
    SlotNotCoveredError,
    TimeoutError,
    TryAgainError,
)

from gateway.core.errors import Unavailable
from gateway.store.failures import as_gateway_error


def _from(exc: Exception, cause: Exception) -> Exception:
    """``exc`` as raised ``from cause``."""
    exc.__cause__ = cause
    return exc


@pytest.mark.parametrize(
    ("exc", "retry_after"),
    [
        (OutOfMemoryError("OOM command not allowed"), 30),
        (ResponseError("OOM command not allowed when used memory > 'maxmemory'"), 30),
        (ConnectionError("Connection closed by server."), 5),
        (TimeoutError("Timeout reading from socket"), 5),
        (ClusterDownError("The cluster is down"), 1),
        (MasterDownError("Link with MASTER is down"), 1),
        (SlotNotCoveredError('Slot "42" is not covered by the cluster.'), 1),
        (TryAgainError("Multiple keys request during rehashing of slot"), 1),
        (ClusterError("TTL exhausted."), 1),
        (_from(RedisClusterException("Redis Cluster cannot be connected"), ConnectionError()), 5),
    ],
)
def test_redis_failures_are_unavailable(exc: Exception, retry_after: int) -> None:
    known = as_gateway_error(exc)
    assert isinstance(known, Unavailable)
    assert known.retry_after == retry_after


@pytest.mark.parametrize(
    "exc",
    [
        ResponseError("WRONGTYPE Operation against a key"),
        ValueError("a bug"),
        RedisClusterException("No way to dispatch this command to Redis Cluster. Missing key."),
    ],
)
def test_other_errors_are_not(exc: Exception) -> None:
    assert as_gateway_error(exc) is None
