"""A whole gateway with many idle queues sends Redis (almost) nothing: no scan per queue by the
recoverer, no safety claim per queue by the dispatcher."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from gateway.dispatch import dispatcher
from gateway.settings import ApiKey, Settings
from tests.support import gateway_client, redis_commands_in

ADMIN = "admin-key-0123456789"
QUEUES = 20
WINDOW = 1.0


async def test_idle_queues_cost_no_redis_commands(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The safety tick of queues that have ready work they cannot push, made short: it must not
    # apply to queues with nothing ready.
    monkeypatch.setattr(dispatcher, "IDLE_TICK", 0.05)
    settings = Settings(
        redis_url=redis_url,
        api_keys=[ApiKey(key=ADMIN, scopes=["admin"])],
        allow_private_endpoints=True,
        recover_interval=0.05,
    )
    async with (
        Redis.from_url(redis_url) as redis,
        gateway_client(settings, ADMIN) as api,
    ):
        for i in range(QUEUES):
            (await api.put(f"/v1/queues/idle-{i}", json={})).raise_for_status()
            endpoint = {"url": "http://127.0.0.1:9/"}
            (await api.post(f"/v1/queues/idle-{i}/endpoints", json=endpoint)).raise_for_status()

        used = await redis_commands_in(redis, WINDOW)
        # Before the due index: 4 scans a second of 20 queues (~ 25 commands each) and a claim
        # per queue every IDLE_TICK.
        assert used == 0
