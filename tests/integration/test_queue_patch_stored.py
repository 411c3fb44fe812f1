"""A PATCH of a queue stores each nested policy it gives whole, with its defaults: the scripts
read the stored policy directly (finish.lua reads circuit_breaker.failures), so a partial object
stored as given made every finish of that queue fail (found by Schemathesis)."""

from __future__ import annotations

import json

from redis.asyncio import Redis

from gateway.settings import ApiKey, Settings
from gateway.store.keys import QueueKeys
from sdk.wire import Backoff, CircuitBreaker
from tests.support import gateway_client

KEY = "patch-stored-key-0123456"


async def test_a_patched_nested_policy_is_stored_with_its_defaults(redis_url: str) -> None:
    settings = Settings(redis_url=redis_url, api_keys=[ApiKey(key=KEY, scopes=["admin"])])
    async with gateway_client(settings, KEY) as api, Redis.from_url(redis_url) as redis:
        assert (await api.put("/v1/queues/q", json={"max_attempts": 7})).status_code == 201
        patched = await api.patch(
            "/v1/queues/q",
            json={"circuit_breaker": {"open_for": 10}, "backoff": {"max_delay": 60}},
        )
        assert patched.status_code == 200
        stored = json.loads(await redis.hget(QueueKeys.of("q").policy, "policy"))
    assert stored["circuit_breaker"] == CircuitBreaker(open_for=10).model_dump(mode="json")
    assert stored["backoff"] == Backoff(max_delay=60).model_dump(mode="json", exclude_none=True)
    assert stored["max_attempts"] == 7  # fields not given are kept
