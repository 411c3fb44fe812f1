"""A stored queue policy with fields this version does not know (a newer gateway saved it,
during a rolling upgrade or before a rollback) is read by the fields it knows, not refused."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from gateway.store.keys import QueueKeys
from gateway.store.queues import stored_policy
from sdk.wire import QueuePolicy

from .conftest import Stores
from .test_store import new_task, setup_queue


async def test_a_policy_with_fields_from_a_newer_version_is_read_by_those_it_knows(
    stores: Stores,
) -> None:
    await setup_queue(stores, QueuePolicy(max_attempts=7))
    k = QueueKeys.of("q")
    newer = {**json.loads(await stores.redis.hget(k.policy, "policy")), "from_later": {"a": 1}}
    await stores.redis.hset(k.policy, "policy", json.dumps(newer))
    found = await stores.queues.get("q")
    assert found is not None
    assert found.policy.max_attempts == 7
    assert (await stores.queues.policies(["q"]))["q"].max_attempts == 7
    assert [q.policy.max_attempts for q in await stores.queues.stored(["q"])] == [7]
    now = stores.clock.now_ms()
    await stores.tasks.enqueue("q", [new_task(now)], now)
    assert await stores.tasks.sweep("q", now + 10**9, 10) == 0


def test_a_policy_of_known_fields_is_still_checked() -> None:
    with pytest.raises(ValidationError):
        stored_policy(json.dumps({"max_attempts": 0, "from_later": 1}))
    with pytest.raises(ValidationError):
        stored_policy("[1]")
