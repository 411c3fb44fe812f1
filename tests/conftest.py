"""Fixtures shared by every test folder.

Redis: one real ``redis-server`` per test session, started on a free loopback
port in a temporary directory (see ``gateway.redis_server``), and flushed before
each test that asks for ``redis_url``, so every test starts from an empty Redis.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from gateway.redis_server import ManagedRedis

# --- Redis -------------------------------------------------------------------


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ManagedRedis]:
    """The session's ``redis-server``; no append-only file, tests need no durability."""
    with ManagedRedis(tmp_path_factory.mktemp("redis"), appendonly=False) as server:
        yield server


@pytest.fixture
def redis_url(redis_server: ManagedRedis) -> str:
    """URL of the session's Redis, emptied for this test."""
    with redis.Redis.from_url(redis_server.url) as client:
        client.flushall()
    return redis_server.url
