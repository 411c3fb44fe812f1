"""The shared clock follows the Redis server's, whatever this host's clock says."""

from __future__ import annotations

import time

from gateway.store.clock import ManualClock, RedisClock


async def test_redis_clock_follows_a_skewed_server() -> None:
    async def server_ms() -> float:
        return time.time() * 1000 + 90_000  # the server runs 90 s ahead of this host

    clock = RedisClock(server_ms)
    await clock.sync()
    assert 89_900 < clock.offset_ms < 90_100
    assert abs(clock.now_ms() - (time.time() * 1000 + 90_000)) < 100


def test_manual_clock_moves_only_when_told() -> None:
    clock = ManualClock(1_000)
    assert clock.now_ms() == 1_000
    clock.advance(250)
    assert clock.now_ms() == 1_250
